#!/bin/bash
# Module tracking against a synthetic root (this machine has no loadable
# modules): the real daemon reads ROOT/proc/modules and ROOT/sys/module in
# the kernel's formats, where the test makes modules appear, vanish and come
# back at another address, driven by `perfsnapctl rescan`. Also: a uevent
# forged by a userspace sender changes nothing and is counted, while a real
# kernel uevent is accepted; lost uevents (ENOBUFS, provoked with the daemon
# stopped) trigger a rescan; rescan is for root only; after a restart the
# rows of modules still loaded continue.
. "$(dirname "$0")/lib.sh"
require_root
use_group

setup_dir "group = $GROUP" "rescan_interval = never"
chmod 755 "$T"
R=$T/root
mkdir -p "$R/proc/sys/kernel/random" "$R/sys/kernel" "$R/sys/module"
# The real kernel's symbols, so that real samples still resolve.
cat /proc/kallsyms > "$R/proc/kallsyms"
cp /sys/kernel/notes "$R/sys/kernel/notes"
echo 6.1.0-synthetic > "$R/proc/sys/kernel/osrelease"
cat /proc/sys/kernel/random/boot_id > "$R/proc/sys/kernel/random/boot_id"
echo "root = $R" >> "$CONF"


mkmod fake_a ffffffffc0a00000
modules_file "fake_a 16384 0 - Live 0xffffffffc0a00000"
start_daemon

json() { "$PERFSNAPCTL" "$@" --format json; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

n=$(json modules | field 'len(d["modules"])')
[ "$n" = 1 ] || fail "at start-up: $n modules recorded, expected 1 (fake_a)"
how=$(json modules | field 'd["modules"][0]["loaded_how"]')
[ "$how" = startup ] || fail "fake_a recorded as loaded by '$how', expected startup"
pass "start-up: fake_a recorded ($how)"

# The section map as written to sysfs, with lengths up to the next section.
json modules --sections > "$T/m1.json"
python3 - "$T/m1.json" <<'EOF' || fail "fake_a's section map differs from sysfs (see above)"
import json, sys
m = json.load(open(sys.argv[1]))["modules"][0]
got = {s["name"]: (s["addr"], s["len"], s["len_source"]) for s in m["sections"]}
want = {".text": ("0xffffffffc0a00000", 0x800, "next"),
        ".text.unlikely": ("0xffffffffc0a00800", 0x800, "next"),
        ".data": ("0xffffffffc0a01000", 0x3000, "next"),     # bounded by base + size
        ".init.text": ("0xffffffffc0b00000", 0, "unknown")}
print("sections:", got)
sys.exit(0 if got == want and m["base"] == "0xffffffffc0a00000" and m["size"] == 16384 else 1)
EOF
pass "fake_a's sections equal what sysfs showed, lengths bounded by the next section"

# A module appears; rescan finds it.
mkmod fake_b ffffffffc0c00000
modules_file "fake_b 8192 0 - Live 0xffffffffc0c00000" "fake_a 16384 0 - Live 0xffffffffc0a00000"
out=$("$PERFSNAPCTL" rescan) || fail "rescan failed: $out"
echo "$out"
echo "$out" | grep -q "1 added, 0 removed, 2 modules" || fail "rescan after fake_b appeared: $out"
pass "rescan found fake_b"

# One vanishes, then comes back at another address.
rm -rf "$R/sys/module/fake_a"
modules_file "fake_b 8192 0 - Live 0xffffffffc0c00000"
out=$("$PERFSNAPCTL" rescan) || fail "rescan failed: $out"
echo "$out" | grep -q "0 added, 1 removed, 1 modules" || fail "rescan after fake_a went: $out"
mkmod fake_a ffffffffc0d00000
modules_file "fake_a 16384 0 - Live 0xffffffffc0d00000" "fake_b 8192 0 - Live 0xffffffffc0c00000"
out=$("$PERFSNAPCTL" rescan) || fail "rescan failed: $out"
echo "$out" | grep -q "1 added, 0 removed, 2 modules" || fail "rescan after fake_a came back: $out"
out=$("$PERFSNAPCTL" rescan) || fail "rescan failed: $out"
echo "$out" | grep -q "0 added, 0 removed, 2 modules" || fail "a rescan with nothing changed: $out"
pass "rescan saw fake_a go and come back; nothing when nothing changed"

"$PERFSNAPCTL" modules
json modules > "$T/m2.json"
python3 - "$T/m2.json" <<'EOF' || fail "modules history is wrong (see above)"
import json, sys
mods = json.load(open(sys.argv[1]))["modules"]
a = [m for m in mods if m["name"] == "fake_a"]
b = [m for m in mods if m["name"] == "fake_b"]
print([(m["name"], m["base"], m["loaded_how"], m["unloaded_how"]) for m in mods])
ok = (len(a) == 2 and len(b) == 1
      and a[0]["base"] == "0xffffffffc0a00000" and a[0]["unloaded_ns"] is not None and a[0]["unloaded_how"] == "rescan"
      and a[1]["base"] == "0xffffffffc0d00000" and a[1]["unloaded_ns"] is None and a[1]["loaded_how"] == "rescan"
      and a[0]["unloaded_ns"] <= a[1]["loaded_ns"]
      and len(a[0]["build_id"]) == 40 and a[0]["build_id"] == a[1]["build_id"] != b[0]["build_id"])
sys.exit(0 if ok else 1)
EOF
pass "modules shows both loads of fake_a with their addresses, and fake_b"

# The journal: each entry carries every section of every module loaded then.
"$PERFSNAPCTL" events
json events > "$T/e.json"
python3 - "$T/e.json" <<'EOF' || fail "the journal is wrong (see above)"
import json, sys
# The records of dynamic symbols (BPF programs, ftrace trampolines) are
# the running kernel's, whatever the root: count the section records, and
# skip entries of dynamic symbols coming and going meanwhile, and of
# kcore snapshots (their timing is test-snapshots.sh's business).
evs = [e for e in json.load(open(sys.argv[1]))["events"] if not e["kind"].startswith(("ksym-", "snapshot-"))]
sec = lambda e: sum(r["type"] == "section" for r in e["records"])
seen = [(e["kind"], e["module"], sec(e), e["n_records"] - len(e["records"])) for e in evs]
print(seen)
want = [("start", None, 4, 0),                 # fake_a: 4 sections
        ("module-add", "fake_b", 8, 0),        # fake_a + fake_b
        ("module-remove", "fake_a", 4, 0),     # fake_b
        ("module-add", "fake_a", 8, 0)]
mods_in = lambda e: sorted({(r["module"], r["start"]) for r in e["records"] if r.get("section") == ".text"})
ok = seen == want and mods_in(evs[3]) == [("fake_a", "0xffffffffc0d00000"), ("fake_b", "0xffffffffc0c00000")]
ok = ok and all(e["kernel"]["build_id"] and e["kernel"]["text_addr"].startswith("0x") for e in evs)
sys.exit(0 if ok else 1)
EOF
pass "events: start, add, remove, add, each with the full section map after it"

# A uevent from a userspace sender (port id != 0): dropped and counted.
forged0=$(status_field uevents_forged); added0=$(status_field modules_added); rescans0=$(status_field rescans)
mkmod fake_c ffffffffc0e00000
cp "$R/proc/modules" "$T/modules.keep"
modules_file "fake_c 8192 0 - Live 0xffffffffc0e00000" "fake_a 16384 0 - Live 0xffffffffc0d00000" "fake_b 8192 0 - Live 0xffffffffc0c00000"
python3 - <<'EOF' || fail "could not send the forged uevent"
import socket
s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 15)   # NETLINK_KOBJECT_UEVENT
s.bind((0, 0))
s.sendto(b"add@/module/fake_c\0ACTION=add\0DEVPATH=/module/fake_c\0SUBSYSTEM=module\0SEQNUM=999999\0", (0, 1))
EOF
# uevents_forged and modules_added move in the callback that handles it.
poll_field uevents_forged -ge $((forged0 + 1))
forged1=$(status_field uevents_forged); added1=$(status_field modules_added)
[ "$forged1" = $((forged0 + 1)) ] || fail "uevents_forged went $forged0 -> $forged1, expected +1"
[ "$added1" = "$added0" ] || fail "a module was added: modules_added $added0 -> $added1 (rescans $rescans0 -> $(status_field rescans))"
json modules | field '[m["name"] for m in d["modules"]]' | grep -q fake_c && fail "fake_c was recorded from a forged uevent"
grep -q "not sent by the kernel" "$T/daemon.log" || fail "no log line about the forged uevent"
pass "a forged uevent changed nothing (uevents_forged $forged0 -> $forged1)"
cp "$T/modules.keep" "$R/proc/modules"

# A flood of them is counted one by one, and logged a few times only.
lines0=$(grep -c "not sent by the kernel" "$T/daemon.log")
python3 - <<'PY' || fail "could not send the forged uevents"
import socket
s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 15)   # NETLINK_KOBJECT_UEVENT
s.bind((0, 0))
for i in range(20000):
    s.sendto(b"add@/module/fake_d\0ACTION=add\0DEVPATH=/module/fake_d\0SUBSYSTEM=module\0SEQNUM=%d\0" % i, (0, 1))
PY
# Those the socket buffer had no room for are lost (uevents_overruns).
poll_field uevents_forged -ge $((forged1 + 1))
sleep 1
forged2=$(status_field uevents_forged); overruns=$(status_field uevents_overruns)
lines=$(( $(grep -c "not sent by the kernel" "$T/daemon.log") - lines0 ))
echo "20000 forged uevents sent: $((forged2 - forged1)) counted, $overruns overruns, $lines log lines about them"
[ $((forged2 - forged1)) -gt 1000 ] || fail "only $((forged2 - forged1)) of 20000 forged uevents were counted"
[ "$lines" -le 5 ] || fail "$lines log lines about forged uevents (at most 5 every 30 s)"
grep -q "Messages like the next one are counted, not logged" "$T/daemon.log" || fail "no line saying the rest are counted"
pass "a flood of forged uevents: $((forged2 - forged1)) counted, $lines logged"

# A real kernel uevent (another subsystem: this kernel has no modules) is accepted.
if [ -w /sys/class/net/lo/uevent ]; then
        acc0=$(status_field uevents_accepted)
        echo change > /sys/class/net/lo/uevent
        poll_field uevents_accepted -gt "$acc0"
        acc1=$(status_field uevents_accepted)
        [ "$acc1" -gt "$acc0" ] || fail "a kernel uevent was not accepted: uevents_accepted $acc0 -> $acc1"
        pass "a real kernel uevent is accepted (uevents_accepted $acc0 -> $acc1)"
fi

# Lost uevents: with the daemon stopped, the kernel overflows its socket
# buffer; the next read gets ENOBUFS, which must trigger a rescan.
if [ -w /sys/class/net/lo/uevent ]; then
        over0=$(status_field uevents_overruns); rescans0=$(status_field rescans)
        kill -STOP "$DPID"
        for _ in $(seq 1 30000); do echo change > /sys/class/net/lo/uevent; done
        kill -CONT "$DPID"
        poll_field uevents_overruns -gt "$over0"
        poll_field rescans -gt "$rescans0"
        over1=$(status_field uevents_overruns); rescans1=$(status_field rescans)
        [ "$over1" -gt "$over0" ] || fail "30000 uevents while stopped: uevents_overruns $over0 -> $over1, expected an overrun"
        [ "$rescans1" -gt "$rescans0" ] || fail "an overrun did not trigger a rescan: rescans $rescans0 -> $rescans1"
        grep -q "uevents were lost" "$T/daemon.log" || fail "no log line about lost uevents"
        pass "lost uevents (ENOBUFS) trigger a rescan (overruns $over0 -> $over1, rescans $rescans0 -> $rescans1)"
fi

# rescan is root's, also for members of the group.
out=$(setpriv --reuid=65534 --regid=65534 --groups="$GID" -- "$PERFSNAPCTL" rescan 2>&1); rc=$?
echo "$out"
[ $rc = 1 ] && echo "$out" | grep -q "only root may request a rescan" || fail "a group member's rescan: exit $rc: $out"
setpriv --reuid=65534 --regid=65534 --groups="$GID" -- "$PERFSNAPCTL" modules > /dev/null || fail "a group member cannot list modules"
pass "rescan is refused to a group member, modules is not"

# Restart: fake_a and fake_b stay loaded, fake_b goes while the daemon is down.
stop_daemon
modules_file "fake_a 16384 0 - Live 0xffffffffc0d00000"
start_daemon
json modules > "$T/m3.json"
python3 - "$T/m3.json" "$T/m2.json" <<'EOF' || fail "the restart did not continue the rows (see above)"
import json, sys
now = json.load(open(sys.argv[1]))["modules"]
before = json.load(open(sys.argv[2]))["modules"]
print([(m["id"], m["name"], m["base"], m["unloaded_how"]) for m in now])
live_a = [m for m in now if m["name"] == "fake_a" and m["unloaded_ns"] is None]
b = [m for m in now if m["name"] == "fake_b"]
old_a = [m for m in before if m["name"] == "fake_a" and m["unloaded_ns"] is None][0]
ok = len(now) == 3 and len(live_a) == 1 and live_a[0]["id"] == old_a["id"] and len(b) == 1 and b[0]["unloaded_ns"] is not None
sys.exit(0 if ok else 1)
EOF
pass "after a restart, fake_a's row continues and fake_b's is closed"
kill -0 "$DPID" || fail "daemon died"
stop_daemon
[ "$DRC" = 0 ] || fail "perfsnapd exited with $DRC"
