#!/bin/bash
# A query drains and commits before it reads: with a drain_interval of
# 60 s (and ring buffers that the load does not fill half), the samples of
# the last seconds answer at once, and status shows them committed
# afterwards; clients asking back to back make the daemon drain and commit
# at most every 250 ms.
. "$(dirname "$0")/lib.sh"
require_root

setup_dir "frequency_hz = 999" "drain_interval = 60s" "commit_interval = 60s"
# After setup_dir's drain_interval: the last line of a key wins. Auto
# gives 1,024 pages a CPU at 999 Hz: half is more than a few seconds of
# samples, so no wake-up drains them either.
start_daemon
# Nothing is drained for 60 s from here (status does not drain).
sleep 1
before=$(status_field stored_samples)

# A busy loop under a name of its own, for 2 s.
cp "$(command -v dash || command -v sh)" "$T/freshspin"
t0=$(now_ns)
timeout 2 "$T/freshspin" -c 'while :; do :; done'
t1=$(now_ns)
sleep 0.1       # past the drain's horizon (10 ms before it begins)

total() {
        "$PERFSNAPCTL" query --since 1m "$@" --format json |
                python3 -c 'import json, sys; print(json.load(sys.stdin)["result"]["total"])'
}
mid=$(status_field stored_samples)
[ "$mid" = "$before" ] || echo "note: status stored_samples went from $before to $mid before the query (a commit of the start-up)"
got=$(total --comm freshspin) || fail "query failed"
elapsed=$(( ($(now_ns) - t1) / 1000000 ))
# 2 s at 999 Hz on one CPU: about 2,000 samples where the loop has a CPU
# to itself; at least 100 on a loaded machine (without the drain: 0).
[ "$got" -ge 100 ] || fail "a query 0.1 s after a 2 s busy loop found $got samples of it (drain_interval 60 s)"
after=$(status_field stored_samples)
[ "$after" -gt "$mid" ] || fail "status stored_samples did not grow with the query's commit: $mid before, $after after"
echo "the busy loop ran $(( (t1 - t0) / 1000000 )) ms; a query that ended ${elapsed} ms after it found $got of its samples; stored_samples $mid -> $after"

# Queries come back to back: each answers, and the daemon drains and
# commits for them at most every 250 ms. Nothing else commits here: the
# batch is open only after a drain, and the only drains are the queries'.
c0=$(status_field commits)
q0=$(now_ns)
for i in $(seq 1 20); do
        n=$(total --comm freshspin) || fail "query $i of 20 back to back failed"
        [ "$n" -ge "$got" ] || fail "query $i of 20 back to back found $n samples, fewer than the first's $got"
done
ms=$(( ($(now_ns) - q0) / 1000000 ))
c1=$(status_field commits)
echo "20 queries back to back in $ms ms: commits $c0 -> $c1"
[ $((c1 - c0)) -ge 1 ] || fail "20 queries in $ms ms made no commit ($c0 -> $c1)"
[ $((c1 - c0)) -le $((ms / 250 + 2)) ] ||
        fail "20 queries in $ms ms made $((c1 - c0)) commits, more than one in 250 ms ($((ms / 250 + 2)))"
check_alive "the queries"
stop_daemon
[ "$DRC" = 0 ] || fail "perfsnapd exited with $DRC"
pass "a query drains and commits first: $got samples of a 2 s loop, with 60 s intervals"

# The first query had them all: the open bucket too, not only the whole
# seconds before it (the stop wrote everything).
echo "offcpu = on" >> "$CONF"
start_daemon
all=$(total --comm freshspin) || fail "query after the restart failed"
[ "$all" = "$got" ] || fail "the query 0.1 s after the loop found $got of its samples; after a stop, $all"
echo "after a stop and a start the loop has $all samples, as the first query found"

# Off-CPU waits are taken from the BPF map the program left at the drain
# before (10 ms after it): the query's drain is two drains.
case "$(status_field offcpu)" in
on) ;;
*) echo "SKIP (this part): offcpu is '$(status_field offcpu)'"; stop_daemon; exit 0 ;;
esac
cp "$(command -v sleep)" "$T/freshsleep"
"$T/freshsleep" 1.5
waited=$("$PERFSNAPCTL" query --since 1m --type offcpu --comm freshsleep --format json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["result"]["total"])') || fail "off-CPU query failed"
echo "a sleep of 1.5 s just ended: the query found $waited ns off the CPU"
[ "$waited" -ge 1400000000 ] && [ "$waited" -le 1700000000 ] ||
        fail "a sleep of 1.5 s that just ended: a query found $waited ns off the CPU (drain_interval 60 s)"
stop_daemon
pass "an off-CPU query drains twice first: a sleep of 1.5 s that just ended weighs $waited ns"
