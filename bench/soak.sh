#!/bin/bash
# A long run of perfsnapd under load, with everything that could leak
# sampled every minute.
#
#   bench/soak.sh BUILD_DIR MINUTES [FREQ]
#
# Starts perfsnapd (from BUILD_DIR) at FREQ (default 999) Hz with a
# private database, a private kcore snapshot cache and a 10-minute
# retention, so that after the first 10 minutes the database should stop
# growing. For MINUTES it runs at once:
#  - bench/workload.sh mixed (fork/exec-heavy, one loop of each kind per CPU);
#  - BPF churn: every minute tests/integration/bpf-prog loads and unloads
#    200 socket filters, which the daemon journals as ksyms;
#  - a client hammering the socket: query --since 5m, query --since 1h
#    --format folded, status, modules, events, ksyms and cache list, in a
#    loop with no pause.
# Every minute it prints the daemon's VmRSS and VmHWM, its open file
# descriptors, the database's main file and WAL bytes, status's
# samples (counted), stored_samples (in the database now), lost and
# dropped_samples, and the client calls made and failed so far.
#
# Verdict (exit 1 if any fails), comparing the last third of the run with
# the middle third (needs MINUTES >= 30; retention passes run every 10
# minutes, so the first 10-minute cut happens at minute 20 and the first
# third is the fill):
#  - RSS: the largest VmRSS of the last third is at most 10 % above the
#    largest of the middle third (queries come and go: the largest, not
#    each sample);
#  - fds: the count in the last third never differs from the middle
#    third's first by more than 2;
#  - database: the main file's bytes in the last third are at most 10 %
#    above the middle third's largest (the WAL is printed too; it is kept
#    up to journal_size_limit, 64 MiB, and grows while long queries hold
#    old snapshots);
#  - no client call failed and the daemon is still running.
# Needs root and bpf().
set -u
B=$(readlink -f "${1:?usage: soak.sh BUILD_DIR MINUTES [FREQ]}")
MIN=${2:?usage: soak.sh BUILD_DIR MINUTES [FREQ]}
FREQ=${3:-999}
HERE=$(dirname "$(readlink -f "$0")")
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 77; }
case "$MIN$FREQ" in *[!0-9]*) echo "MINUTES and FREQ are numbers" >&2; exit 2 ;; esac
T=$(mktemp -d /tmp/perfsnapd-soak.XXXXXX)
# Copies, so that rebuilding BUILD_DIR meanwhile does not touch the run.
mkdir "$T/bin"
cp "$B/daemon/perfsnapd" "$B/client/perfsnapctl" "$B/tests/integration/bpf-prog" "$T/bin/" || exit 1
BPF=$T/bin/bpf-prog
CTL=$T/bin/perfsnapctl
cleanup() {
        kill $WL $CH $CL 2>/dev/null
        [ -n "${DPID:-}" ] && kill -TERM $DPID 2>/dev/null
        wait 2>/dev/null
        rm -rf "$T"
}
trap cleanup EXIT
WL= CH= CL=
mkdir -m 0700 "$T/cache"
cat > "$T/conf" <<CONF
database = $T/db
cache_dir = $T/cache
socket = $T/sock
frequency_hz = $FREQ
retention = 10m
CONF
export PERFSNAPD_SOCKET=$T/sock
"$T/bin/perfsnapd" --config "$T/conf" > "$T/daemon.log" 2>&1 &
DPID=$!
for _ in $(seq 100); do "$CTL" status >/dev/null 2>&1 && break; sleep 0.1; done
"$CTL" status >/dev/null || { echo "perfsnapd did not start:" >&2; cat "$T/daemon.log" >&2; exit 1; }
END=$(( $(date +%s) + MIN * 60 ))

bash "$HERE/workload.sh" mixed $((MIN * 60)) > /dev/null 2>&1 & WL=$!
( while [ "$(date +%s)" -lt "$END" ]; do
        "$BPF" churn --count 200 --prefix soak > /dev/null 2>> "$T/churn.err" || echo x >> "$T/churn.fail"
        sleep 60
  done ) & CH=$!
( while [ "$(date +%s)" -lt "$END" ]; do
        for c in "query --since 5m" "query --since 1h --format folded" status modules events ksyms "cache list"; do
                # shellcheck disable=SC2086
                if "$CTL" $c > /dev/null 2>> "$T/client.err"; then echo >> "$T/calls"; else echo "$c" >> "$T/calls.fail"; fi
        done
  done ) & CL=$!

count() { [ -f "$1" ] && wc -l < "$1" || echo 0; }
printf '%4s %9s %9s %4s %10s %10s %10s %10s %6s %7s %7s %6s\n' min rss_kb hwm_kb fds db_bytes wal_bytes samples stored lost dropped calls failed
: > "$T/table"
for m in $(seq 1 "$MIN"); do
        sleep $(( END - (MIN - m) * 60 - $(date +%s) )) 2>/dev/null
        if ! kill -0 $DPID 2>/dev/null; then echo "perfsnapd exited at minute $m:" >&2; tail -20 "$T/daemon.log" >&2; exit 1; fi
        read -r rss hwm <<< "$(awk '/VmRSS/ { r = $2 } /VmHWM/ { h = $2 } END { print r, h }' /proc/$DPID/status)"
        fds=$(ls /proc/$DPID/fd | wc -l)
        db=$(stat -c %s "$T/db")
        wal=$( [ -f "$T/db-wal" ] && stat -c %s "$T/db-wal" || echo 0)
        read -r samples stored lost dropped <<< "$("$CTL" status --format json 2>/dev/null | python3 -c '
import json, sys
try:
    s = json.load(sys.stdin); s = s.get("parameters", s)
    print(s["samples"], s["stored_samples"], s["lost"], s["dropped_samples"])
except ValueError:
    print("- - - -")')"
        printf '%4d %9d %9d %4d %10d %10d %10s %10s %6s %7s %7d %6d\n' "$m" "$rss" "$hwm" "$fds" "$db" "$wal" "$samples" "$stored" "$lost" "$dropped" \
                "$(count "$T/calls")" "$(count "$T/calls.fail")" | tee -a "$T/table"
done

echo "BPF churn rounds failed: $(count "$T/churn.fail")"
[ -s "$T/calls.fail" ] && { echo "failed client calls (first 5):"; sort "$T/calls.fail" | uniq -c | head -5; head -5 "$T/client.err"; }
[ "$MIN" -ge 30 ] || { echo "no verdict: needs MINUTES >= 30"; exit 0; }
python3 - "$T/table" "$(count "$T/calls.fail")" "$(count "$T/churn.fail")" <<'PY'
import sys
rows = [list(map(int, l.split()[:6])) for l in open(sys.argv[1])]
n = len(rows) // 3
mid, last = rows[n:2 * n], rows[2 * n:]
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok = ok and cond
rb, rl = max(r[1] for r in mid), max(r[1] for r in last)
check(rl <= rb * 1.10, "RSS: max %d kB in the last third vs %d kB in the middle third (%+.1f %%)" % (rl, rb, 100.0 * (rl - rb) / rb))
f0 = mid[0][3]
check(max(abs(r[3] - f0) for r in last) <= 2, "fds: %d at the middle third's start, last third %d..%d" % (f0, min(r[3] for r in last), max(r[3] for r in last)))
db, dl = max(r[4] for r in mid), max(r[4] for r in last)
check(dl <= db * 1.10, "database file: max %d bytes in the last third vs %d in the middle third (WAL up to %d)" % (dl, db, max(r[5] for r in last)))
check(sys.argv[2] == "0", "client calls failed: %s" % sys.argv[2])
check(sys.argv[3] == "0", "BPF churn rounds failed: %s" % sys.argv[3])
sys.exit(0 if ok else 1)
PY
