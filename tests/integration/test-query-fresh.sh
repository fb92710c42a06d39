#!/bin/bash
# A query drains and commits before it reads: with drain_interval and
# commit_interval of 60 s, the samples of the last seconds answer at once,
# and status shows them committed afterwards.
. "$(dirname "$0")/lib.sh"
require_root

setup_dir "frequency_hz = 999" "drain_interval = 60s" "commit_interval = 60s"
# After setup_dir's drain_interval: the last line of a key wins.
start_daemon
# The commit at start-up aside, nothing is committed for 60 s from here.
sleep 1
before=$(status_field stored_samples)

# A busy loop under a name of its own, for 2 s.
cp "$(command -v dash || command -v sh)" "$T/freshspin"
t0=$(now_ns)
timeout 2 "$T/freshspin" -c 'while :; do :; done'
t1=$(now_ns)
sleep 1.2       # past the end of the loop's last bucket

total() {
        "$PERFSNAPCTL" query --since 1m "$@" --format json |
                python3 -c 'import json, sys; print(json.load(sys.stdin)["result"]["total"])'
}
mid=$(status_field stored_samples)
[ "$mid" = "$before" ] || echo "note: status stored_samples went from $before to $mid before the query (a commit of the start-up)"
got=$(total --comm freshspin) || fail "query failed"
elapsed=$(( ($(now_ns) - t1) / 1000000 ))
# 2 s at 999 Hz on one CPU: about 2,000 samples; at least half, whatever
# else the machine runs.
[ "$got" -ge 1000 ] || fail "a query 1.2 s after a 2 s busy loop found $got samples of it (drain_interval and commit_interval 60 s)"
after=$(status_field stored_samples)
[ "$after" -gt "$mid" ] || fail "status stored_samples did not grow with the query's commit: $mid before, $after after"
echo "the busy loop ran $(( (t1 - t0) / 1000000 )) ms; a query that ended ${elapsed} ms after it found $got of its samples; stored_samples $mid -> $after"

# Queries come back to back: the daemon drains for them at most every
# 250 ms, and each answers.
for i in 1 2 3 4 5; do
        n=$(total --comm freshspin) || fail "query $i of 5 back to back failed"
        [ "$n" -ge "$got" ] || fail "query $i of 5 back to back found $n samples, fewer than the first's $got"
done
check_alive "the queries"
stop_daemon
[ "$DRC" = 0 ] || fail "perfsnapd exited with $DRC"
pass "a query drains and commits first: $got samples of a 2 s loop, with 60 s intervals"
