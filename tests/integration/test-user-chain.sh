#!/bin/bash
# A kernel address in the user part of a real call chain. The kernel walks
# a user stack by its frame pointers and reports whatever each record holds
# (perf_callchain_user()); a program without frame pointers leaves any value
# in rbp. perfsnapd's own stack held the sysfs section addresses it had just
# parsed: that is how a frame at brd's .orc_unwind came out as a bare hex
# "unresolved frame in brd's range" in the VM test. forged-frame spins on a
# forged record { caller's record, ADDR } whose caller returns to 0x401000.
# perf shows that the kernel reports ADDR in the user chain; perfsnapd must
# drop it and what follows it (not user frames), count them, and keep the
# real user frame.
. "$(dirname "$0")/lib.sh"
require_root
[ "$(uname -m)" = x86_64 ] || skip "forged-frame is x86-64 only"

ADDR=0xffffffffc0a012f0
# No cache: no function tables, so user frames stay file offsets, which
# is what the checks of frame identity below look at.
setup_dir "frequency_hz = 999" "callchain_depth = 32" "cache_dir ="
# perf first, with perfsnapd not running: on this host's kernel (6.18),
# perf 6.1's script and report abort on the first MMAP2 record of a
# perf.data recorded while perfsnapd samples ("assertion failed at
# util/build-id.c:1010", then stack smashing).
if command -v perf >/dev/null && perf record -q -B -g -F 999 -o "$T/perf.data" -- "$FORGED_FRAME" $ADDR 2 >/dev/null 2>"$T/perf.err"; then
        # perf's own view of the same kind of record: the forged address in
        # the user part, under forged-frame's leaf.
        rc=0
        perf script -i "$T/perf.data" -F comm,ip 2>"$T/perf-script.err" > "$T/perf-script.txt" || rc=$?
        # That abort, when another perfsnapd samples this machine (one
        # started by hand, or by .ci/quickstart): perf cannot say whether
        # the kernel reported the address, so nothing below would prove
        # anything.
        if [ "$rc" -gt 128 ] && grep -q "build-id.c" "$T/perf-script.err"; then
                head -3 "$T/perf-script.err"
                skip "perf script aborted (signal $((rc - 128))) on a perf.data recorded while another sampler ran: $(pgrep -a perfsnapd | head -3 | tr '\n' ' ')"
        fi
        n=$(grep -c "^[[:space:]]*${ADDR#0x}\$" "$T/perf-script.txt")
        echo "perf script: $n call chain entries at $ADDR"
        [ "$n" -gt 0 ] || { head -20 "$T/perf-script.txt" "$T/perf-script.err"; fail "perf recorded no call chain entry at $ADDR"; }
        pass "the kernel reports $ADDR in forged-frame's user call chain ($n samples, perf script)"
else
        # Without perf's word that the kernel reported the address, the
        # checks below could pass on nothing.
        cat "$T/perf.err"
        skip "perf record -g does not work here"
fi

start_daemon
before=$(status_field invalid_user_frames)
# Two processes: ASLR puts forged-frame's code at two addresses.
"$FORGED_FRAME" $ADDR 1 & P1=$!
wait $P1 || fail "forged-frame failed"
"$FORGED_FRAME" $ADDR 1 & P2=$!
wait $P2 || fail "forged-frame failed"

# Resolved at the drain; the forged entry and the one after it, at least.
poll_field invalid_user_frames -ge $((before + 2))
now=$FIELD
echo "status: invalid_user_frames $before -> $now"
[ "$now" -ge $((before + 2)) ] || fail "invalid_user_frames went from $before to $now, expected at least 2 more (the forged entry and the one after it)"
pass "status counts the dropped entries (invalid_user_frames $before -> $now)"

# Everything committed, then read back through a new daemon on the same database.
stop_daemon
start_daemon
"$PERFSNAPCTL" query --since 5m --comm forged-frame --format folded > "$T/folded.txt" || fail "query failed"
"$PERFSNAPCTL" query --since 5m --comm forged-frame --top 5
python3 - "$T/folded.txt" "$ADDR" <<'PY' || fail "forged-frame's stacks are wrong (see above)"
import re, sys
addr = int(sys.argv[2], 16)
total, bad, leaf_user = 0, {}, 0
for line in open(sys.argv[1]):
    head, _, count = line.rstrip("\n").rpartition(" ")
    frames = head.split(";")[1:]
    total += int(count)
    for f in frames:
        if re.fullmatch(r"0x[0-9a-f]+", f) and (int(f, 16) >= 1 << 63 or int(f, 16) == 0x401000):
            bad[f] = bad.get(f, 0) + int(count)
    if frames and "forged-frame" in frames[-1]:
        leaf_user += int(count)
print(f"forged-frame: {total} samples; leaf in forged-frame's own code: {leaf_user}; "
      f"kernel-half or after-it hex frames: {bad}")
assert total >= 100, f"expected >= 100 samples of forged-frame (2 s at 999 Hz), got {total}"
assert not bad, f"user frames at {sorted(bad)} were stored"
assert leaf_user >= total // 2, f"only {leaf_user} of {total} stacks end in forged-frame's code"
PY
pass "no kernel-half address or frame after it in forged-frame's stacks; its own frame is kept"

# Its code is one frame in both processes: keyed by the file and the offset
# in it, not by where each process had it mapped.
for p in $P1 $P2; do
        "$PERFSNAPCTL" query --since 5m --pid $p --format json > "$T/q.$p.json" || fail "query --pid $p failed"
done
python3 - "$T/q.$P1.json" "$T/q.$P2.json" "$FORGED_FRAME" <<'PY' || fail "forged-frame's code is not one frame in its two processes (see above)"
import json, os, sys
size = os.path.getsize(sys.argv[3])
tops = []
for path in sys.argv[1:3]:
    rows = [r for r in json.load(open(path))["result"]["rows"]
            if not r["kernel"] and r["module"].endswith("/forged-frame")]
    rows.sort(key=lambda r: -r["samples"])
    print(path.rsplit("/", 1)[1], [(r["symbol"], r["samples"]) for r in rows[:3]])
    assert rows, f"no user rows in forged-frame for {path}"
    tops.append(rows[0]["symbol"])
assert tops[0] == tops[1], f"the two processes' hottest user frames differ: {tops}"
# An unnamed frame in a file reads FILE+0x<offset in it>.
assert tops[0].startswith("forged-frame+0x"), f"{tops[0]} is not forged-frame+0x<offset>"
assert int(tops[0].rpartition("+0x")[2], 16) < size, f"{tops[0]} is no offset in forged-frame ({size} bytes)"
PY
pass "forged-frame's hottest code is the same frame ($(python3 -c 'import json,sys; r=[x for x in json.load(open(sys.argv[1]))["result"]["rows"] if not x["kernel"]]; r.sort(key=lambda x:-x["samples"]); print(r[0]["symbol"])' "$T/q.$P1.json"), a file offset) in both processes"

# A return address in user space but outside all executable code (here
# 0x1000, never mapped): no return address either, dropped with what
# follows it, counted.
before=$(status_field invalid_user_frames)
t0=$(now_ns)
"$FORGED_FRAME" 0x1000 1 & P3=$!
wait $P3 || fail "forged-frame failed"
poll_field invalid_user_frames -ge $((before + 2))
echo "status: invalid_user_frames $before -> $FIELD"
[ "$FIELD" -ge $((before + 2)) ] || fail "invalid_user_frames went from $before to $FIELD for return addresses outside executable code"
wait_committed "$(now_ns)"
"$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P3 --format folded > "$T/folded3.txt" || fail "query failed"
python3 - "$T/folded3.txt" <<'PY' || fail "forged-frame's stacks hold frames outside executable code (see above)"
import sys
total, bad = 0, {}
for line in open(sys.argv[1]):
    head, _, count = line.rstrip("\n").rpartition(" ")
    total += int(count)
    for f in head.split(";")[1:]:
        if f in ("0x1000", "0x401000"):
            bad[f] = bad.get(f, 0) + int(count)
print(f"forged-frame with 0x1000: {total} samples; frames at 0x1000 or after it: {bad}")
assert total >= 100, f"expected >= 100 samples, got {total}"
assert not bad, f"user frames at {sorted(bad)} were stored"
PY
pass "a return address outside executable code, and the one after it, are dropped and counted"
