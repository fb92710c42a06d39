#!/bin/bash
# What one local user can make the root daemon hold, and whether root still
# gets an answer: a member of the group streams calls and reads no replies
# (memory stays bounded, the client is dropped after client_timeout), holds
# every connection it may and runs queries in loops (root's status still
# answers at once), and idles (dropped after client_timeout).
. "$(dirname "$0")/lib.sh"
require_root
use_group
command -v python3 >/dev/null || skip "needs python3"

setup_dir "group = $GROUP" "client_timeout = 3s" "max_clients = 64" "max_clients_per_user = 64" \
        "max_queries_per_user = 2"
chmod 755 "$T"
start_daemon
busy_start 2
sleep 3
busy_stop

# A sanitizer build's RSS is mostly shadow memory and its quarantine of
# freed blocks: the memory bound is checked on ordinary builds only.
SANITIZED=0
if grep -q "libasan\|libubsan" /proc/"$DPID"/maps 2>/dev/null; then SANITIZED=1; fi

python3 - "$SOCK" "$DPID" "$GID" "$T/daemon.log" "$SANITIZED" <<'PY' || fail "client limits"
import json, os, resource, socket, sys, time
path, dpid, gid, log = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sanitized = sys.argv[5] == "1"
STATUS = b'{"method":"io.perfsnap.Status"}\0'
QUERY = b'{"method":"io.perfsnap.Query","parameters":{"since_ns":0,"top":10000}}\0'

def rss_kb():
    with open(f"/proc/{dpid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s

def read_reply(s, timeout=10):
    s.settimeout(timeout)
    data = b""
    while not data.endswith(b"\0"):
        chunk = s.recv(65536)
        if not chunk:
            return None
        data += chunk
    return json.loads(data[:-1])

def as_member():
    os.setgroups([gid])
    os.setgid(65534)
    os.setuid(65534)

def in_child(fn):
    pid = os.fork()
    if pid == 0:
        try:
            as_member()
            fn()
            os._exit(0)
        except BaseException as e:
            print(f"member: {e!r}", flush=True)
            os._exit(1)
    return pid

def root_status_ms():
    t0 = time.monotonic()
    s = connect()
    s.sendall(STATUS)
    r = read_reply(s, timeout=5)
    s.close()
    ms = (time.monotonic() - t0) * 1000
    assert r is not None and "parameters" in r, f"root status: {r}"
    return ms

# ---- 1. a flood of calls whose replies are never read ----
rss0 = rss_kb()
def flood():
    s = connect()
    s.setblocking(False)
    sent, t0, dropped = 0, time.monotonic(), None
    while time.monotonic() < t0 + 15:
        try:
            sent += s.send(STATUS * 64)
        except BlockingIOError:
            time.sleep(0.01)
        except (BrokenPipeError, ConnectionResetError):
            dropped = time.monotonic() - t0
            break
    print(f"flood: the daemon took {sent} bytes of calls, dropped the client after {dropped} s", flush=True)
    assert dropped is not None, "the daemon kept a client that reads nothing for 15 s"
    # It stops taking calls while replies are unread, then drops the
    # client once none were read for client_timeout (3 s).
    assert 2 <= dropped <= 10, f"dropped after {dropped:.1f} s, client_timeout is 3 s"
    assert sent < 64 << 20, f"the daemon read {sent} bytes of calls it could not answer"
pid = in_child(flood)
peak = rss0
while True:
    done, st = os.waitpid(pid, os.WNOHANG)
    if done == pid:
        break
    peak = max(peak, rss_kb())
    time.sleep(0.05)
assert st == 0, "the flooding client failed"
print(f"flood: daemon RSS {rss0} kB before, {peak} kB at most during", flush=True)
if sanitized:
    print("flood: sanitizer build, the 128 MB bound is not checked", flush=True)
else:
    assert peak < 128 * 1024, f"daemon RSS reached {peak} kB during the flood"
with open(log) as f:
    text = f.read()
assert "read none of its replies" in text, "the log does not say why the flooding client was dropped"
print("ok: a client that streams calls and reads nothing " + ("" if sanitized else "holds the daemon under 128 MB and ") + "is dropped", flush=True)

# ---- 2. a member holds every connection it may and loops queries ----
def hog(ready_fd):
    conns = [connect() for _ in range(80)]
    time.sleep(1)
    held, refused = [], 0
    for s in conns:
        s.setblocking(False)
        try:
            data = s.recv(65536)                 # refused at once, with a reason
        except BlockingIOError:
            held.append(s)                       # accepted: nothing to read
            continue
        assert b"max_clients" in data, f"refused without the reason: {data!r}"
        refused += 1
        s.close()
    os.write(ready_fd, f"{len(held)} {refused}\n".encode())
    # Queries on every connection, in a loop, until killed; replies read.
    end = time.monotonic() + 20
    while time.monotonic() < end:
        for s in held:
            try:
                s.settimeout(5)
                s.sendall(QUERY)
            except OSError:
                pass
        for s in held:
            try:
                read_reply(s, timeout=5)
            except OSError:
                pass
r_fd, w_fd = os.pipe()
pid = in_child(lambda: hog(w_fd))
os.close(w_fd)
line = os.read(r_fd, 64).decode().split()
held, refused = int(line[0]), int(line[1])
print(f"hog: the member holds {held} connections, {refused} refused", flush=True)
assert held == 62, f"a member holds {held} of 64 connections, expected 62 (2 are root's)"
time.sleep(1)
times = [root_status_ms() for _ in range(20)]
os.kill(pid, 9)
os.waitpid(pid, 0)
print("root status under the hog: " + " ".join(f"{t:.1f}" for t in times) + " ms", flush=True)
assert max(times) < 100, f"root's status took up to {max(times):.1f} ms"
print("ok: root's status answers in < 100 ms (20 of 20) while a member holds every other slot and queries", flush=True)

# ---- 3. an idle client is dropped ----
def idle():
    s = connect()
    s.settimeout(15)
    t0 = time.monotonic()
    data = s.recv(100)
    waited = time.monotonic() - t0
    assert data == b"", f"idle client got {data!r}"
    assert 2 <= waited <= 8, f"idle client dropped after {waited:.1f} s, client_timeout is 3 s"
    print(f"idle: dropped after {waited:.1f} s", flush=True)
pid = in_child(idle)
_, st = os.waitpid(pid, 0)
assert st == 0, "idle check failed"
print("ok: an idle client is dropped after client_timeout", flush=True)
PY
kill -0 "$DPID" || fail "daemon died"

# ---- per-user connection cap, after SIGHUP lowers it ----
sed -i 's/^max_clients_per_user = .*/max_clients_per_user = 3/' "$CONF"
kill -HUP "$DPID"
sleep 1
python3 - "$SOCK" "$GID" <<'PY' || fail "max_clients_per_user"
import json, os, socket, sys
path, gid = sys.argv[1], int(sys.argv[2])
os.setgroups([gid]); os.setgid(65534); os.setuid(65534)
held = []
for i in range(4):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(0.5)
    try:
        data = s.recv(65536)
    except socket.timeout:
        data = None
    held.append(s)
    if i < 3:
        assert data is None, f"connection {i + 1} of 3 allowed was refused: {data!r}"
    else:
        assert data and b"max_clients_per_user" in data, f"the 4th connection was not refused: {data!r}"
        print("4th connection:", json.loads(data.rstrip(b"\0"))["parameters"]["message"])
PY
"$PERFSNAPCTL" status > /dev/null || fail "root's status failed after the per-user refusal"
pass "a member's 4th connection is refused with max_clients_per_user = 3; root still answered"
stop_daemon
[ "$DRC" = 0 ] || fail "perfsnapd exited with $DRC"
pass "client limits"
