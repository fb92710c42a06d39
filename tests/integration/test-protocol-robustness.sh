#!/bin/bash
# Bad input on the socket gets an error reply saying what is wrong, or a
# disconnect; the daemon keeps running and answering. Parsing is strict
# where json-c is not (duplicate keys, UTF-8, 64-bit integers); oneway
# calls get no reply; names that are not UTF-8 are answered as U+FFFD.
. "$(dirname "$0")/lib.sh"
require_root
setup_dir
start_daemon

python3 - "$SOCK" <<'PY' || fail "protocol robustness checks failed"
import json, socket, sys, time
path = sys.argv[1]

def talk(payload, read=True):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    for attempt in range(100):
        try:
            s.connect(path)
            break
        except BlockingIOError:     # listen backlog full: back-pressure, not an error
            time.sleep(0.01)
    else:
        raise AssertionError("could not connect after 100 attempts")
    try:
        s.sendall(payload)
    except (BrokenPipeError, ConnectionResetError):
        pass
    data = b""
    if read:
        try:
            while not data.endswith(b"\0"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except (ConnectionResetError, socket.timeout):
            pass
    s.close()
    return data

def reply(payload):
    data = talk(payload)
    assert data.endswith(b"\0"), f"no NUL-terminated reply to {payload[:60]!r}: {data[:200]!r}"
    return json.loads(data[:-1])

cases = [
    (b"this is not json\0", "io.perfsnap.InvalidMessage"),
    (b"[1,2,3]\0", "io.perfsnap.InvalidMessage"),
    (b'{"method":42}\0', "io.perfsnap.InvalidMessage"),
    (b'{"method":"io.perfsnap.Query","parameters":[]}\0', "io.perfsnap.InvalidMessage"),
    (b'{"method":"io.perfsnap.Nope"}\0', "org.varlink.service.MethodNotFound"),
    (b'{"method":"io.perfsnap.Query","parameters":{"top":"many"}}\0', "io.perfsnap.InvalidParameter"),
    (b'{"method":"io.perfsnap.Query","parameters":{"cpu":-7}}\0', "io.perfsnap.InvalidParameter"),
    (b'{"method":"io.perfsnap.Query","parameters":{"bogus":1}}\0', "io.perfsnap.InvalidParameter"),
    (b'{"method":"io.perfsnap.Query","parameters":{"comm":"' + b"x" * 500 + b'"}}\0', "io.perfsnap.InvalidParameter"),
    (b"[" * 100000 + b"\0", "io.perfsnap.InvalidMessage"),
]
for payload, err in cases:
    r = reply(payload)
    assert r.get("error") == err, f"{payload[:50]!r}: expected {err}, got {r}"
    print(f"ok: {payload[:40]!r}... -> {err}")

# An oversized request (no NUL within 64 KiB) gets an error and a disconnect.
data = talk(b"{" + b" " * (200 * 1024))
assert b"io.perfsnap.InvalidMessage" in data, f"oversized request: {data[:200]!r}"
print("ok: oversized request refused")

# Half a message then a hang-up; a burst of connections that close at once.
talk(b'{"method":"io.perfsnap.Sta', read=False)
for _ in range(200):
    talk(b"", read=False)
# Past max_clients (64) a connection is refused with Busy, not reset blindly;
# wait until the daemon has seen the burst's hang-ups.
for _ in range(100):
    r = reply(b'{"method":"io.perfsnap.Status"}\0')
    if r.get("error") != "io.perfsnap.Busy":
        break
    time.sleep(0.05)
assert "parameters" in r and "version" in r["parameters"], f"daemon not answering after the burst: {r}"
print("ok: burst of 200 connections survived")

# Two calls in one write are both answered, in order.
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(5); s.connect(path)
s.sendall(b'{"method":"io.perfsnap.Status"}\0{"method":"io.perfsnap.Query","parameters":{"since_ns":0}}\0')
data = b""
while data.count(b"\0") < 2:
    chunk = s.recv(65536)
    assert chunk, "connection closed before both replies"
    data += chunk
a, b = data.split(b"\0")[:2]
assert "version" in json.loads(a)["parameters"], a[:200]
assert "rows" in json.loads(b)["parameters"], b[:200]
print("ok: pipelined calls answered in order")

# What json-c would let through, refused with the rule it broke.
strict = [
    (b'{"method":"io.perfsnap.Query","method":"io.perfsnap.Status"}', "twice"),
    (b'{"method":"io.perfsnap.Query","parameters":{"pid":1,"pid":2}}', "twice"),
    (b'{"method":"io.perfsnap.Query","parameters":{"comm":"\xc0\xaf"}}', "UTF-8"),
    (b'{"method":"io.perfsnap.Query","parameters":{"comm":"\xed\xa0\x80"}}', "UTF-8"),
    (b'{"method":"io.perfsnap.Query","parameters":{"comm":"\xf4\x90\x80\x80"}}', "UTF-8"),
    (b'{"method":"io.perfsnap.Query","parameters":{"comm":"\\udc00"}}', "surrogate"),
    (b'{"method":"io.perfsnap.Modules","parameters":{"since_ns":18446744073709551616}}', "64-bit"),
    (b'{"method":"io.perfsnap.Status","more":true,"oneway":true}', "together"),
]
for payload, why in strict:
    r = reply(payload + b"\0")
    assert r.get("error") == "io.perfsnap.InvalidMessage" and why in r["parameters"].get("message", ""), \
        f"{payload!r}: expected InvalidMessage saying {why!r}, got {r}"
    print(f"ok: {payload[:60]!r}... -> {r['parameters']['message']}")

# Integers from 2^63 up are refused where a parameter stops below 2^63,
# not clamped to 2^63 - 1.
for method, key in (("Modules", "since_ns"), ("Events", "limit"), ("Ksyms", "since_ns")):
    r = reply(b'{"method":"io.perfsnap.%s","parameters":{"%s":9223372036854775808}}\0' % (method.encode(), key.encode()))
    assert r.get("error") == "io.perfsnap.InvalidParameter" and "2^63" in r["parameters"]["message"], f"{method}: {r}"
r = reply(b'{"method":"io.perfsnap.CachePrune","parameters":{"max_size":18446744073709551615}}\0')
assert r.get("error") == "io.perfsnap.InvalidParameter" and "2^63" in r["parameters"]["message"], f"CachePrune: {r}"
print("ok: integers of 2^63 and more refused by Modules, Events, Ksyms and CachePrune")

# A oneway call gets no reply: the reply to the call after it is the next
# message, in step.
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(5); s.connect(path)
s.sendall(b'{"method":"io.perfsnap.Query","oneway":true}\0{"method":"io.perfsnap.Nope","oneway":true}\0'
          b'{"method":"io.perfsnap.Status"}\0')
data = b""
while not data.endswith(b"\0"):
    chunk = s.recv(65536)
    assert chunk, "connection closed before the Status reply"
    data += chunk
msgs = data.split(b"\0")[:-1]
assert len(msgs) == 1 and "version" in json.loads(msgs[0])["parameters"], f"replies after oneway calls: {data[:300]!r}"
s.settimeout(0.5)
try:
    extra = s.recv(65536)
except socket.timeout:
    extra = b""
assert extra == b"", f"a oneway call was answered: {extra[:200]!r}"
s.close()
print("ok: oneway calls executed without a reply, the next reply in step")

r = reply(b'{"method":"io.perfsnap.Status"}\0')
assert r["parameters"]["protocol"] == 1, r
print("ok: daemon still answers Status")
PY

# A process may name itself with bytes that are not UTF-8: its samples are
# answered as U+FFFD, and the answer is valid UTF-8 that perfsnapctl reads.
T0=$(date +%s%N)
python3 -c '
import ctypes, time
ctypes.CDLL(None).prctl(15, b"\xff\xc0\xafspin", 0, 0, 0)
end = time.time() + 1.5
while time.time() < end:
    pass
' || fail "could not run a process named with bytes that are not UTF-8"
wait_committed "$(date +%s%N)"
python3 - "$SOCK" "$T0" <<'PY' || fail "a comm that is not UTF-8 broke the answer"
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(10); s.connect(sys.argv[1])
s.sendall(b'{"method":"io.perfsnap.Query","parameters":{"since_ns":%d}}\0' % int(sys.argv[2]))
data = b""
while not data.endswith(b"\0"):
    chunk = s.recv(1 << 20)
    assert chunk, "connection closed before the reply"
    data += chunk
text = data[:-1].decode("utf-8")        # strict: raises on anything that is not UTF-8
rows = json.loads(text)["parameters"]["rows"]
comms = sorted(set(r["comm"] for r in rows))
assert "\ufffd\ufffd\ufffdspin" in comms, f"no row of the renamed process; comms: {comms}"
print("ok: the renamed process answered as", ascii("\ufffd\ufffd\ufffdspin"))
PY
"$PERFSNAPCTL" query --since 1m > "$T/query.txt" || fail "perfsnapctl query failed with a comm that is not UTF-8"
grep -q "spin" "$T/query.txt" || fail "perfsnapctl query does not show the renamed process"
kill -0 "$DPID" 2>/dev/null || fail "perfsnapd died"
pass "daemon survived malformed, oversized and truncated requests; strict parsing; oneway; names that are not UTF-8"
