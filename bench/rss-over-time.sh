#!/bin/bash
# RSS of perfsnapd over a long run.
#
#   bench/rss-over-time.sh BUILD_DIR MINUTES [FREQ] [WORKLOAD]
#
# Starts perfsnapd (from BUILD_DIR) at FREQ (default 999) with a private
# database, runs bench/workload.sh WORKLOAD (default mixed) for MINUTES,
# and prints the daemon's resident set (VmRSS), its peak (VmHWM), the
# memory members of its status, the samples stored, lost (the kernel's
# count of records the ring buffers had no room for) and not stored
# (dropped_samples), and its CPU time so far (user + system, seconds)
# every minute; at the end, the hours by cgroup it built and the stack
# nodes and frames it interned (how often the load's call chains are new).
# Needs root.
set -u
B=$(readlink -f "${1:?usage: rss-over-time.sh BUILD_DIR MINUTES [FREQ] [WORKLOAD]}")
MIN=${2:?usage: rss-over-time.sh BUILD_DIR MINUTES [FREQ] [WORKLOAD]}
FREQ=${3:-999}
WORKLOAD=${4:-mixed}
HERE=$(dirname "$(readlink -f "$0")")
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 77; }

T=$(mktemp -d /tmp/perfsnapd-rss.XXXXXX)
trap 'kill $WL 2>/dev/null; [ -n "${DPID:-}" ] && kill -TERM $DPID 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
cat > "$T/conf" <<CONF
database = $T/db
cache_dir =
socket = $T/sock
frequency_hz = $FREQ
CONF
export PERFSNAPD_SOCKET=$T/sock
"$B/daemon/perfsnapd" --config "$T/conf" > "$T/daemon.log" 2>&1 &
DPID=$!
for _ in $(seq 100); do "$B/client/perfsnapctl" status >/dev/null 2>&1 && break; sleep 0.1; done
bash "$HERE/workload.sh" "$WORKLOAD" $((MIN * 60)) & WL=$!
printf '%4s %10s %10s %12s %12s %12s %12s %10s %6s %7s %8s\n' min rss_kb hwm_kb heap sqlite caches tasks samples lost dropped cpu_s
TICK=$(getconf CLK_TCK)
for m in $(seq 1 "$MIN"); do
        sleep 60
        read -r rss hwm <<< "$(awk '/VmRSS/ { r = $2 } /VmHWM/ { h = $2 } END { print r, h }' /proc/$DPID/status)"
        # utime and stime: fields 14 and 15, after the command in parentheses.
        cpu=$(sed 's/.*) //' /proc/$DPID/stat | awk -v t="$TICK" '{ printf "%.2f", ($12 + $13) / t }')
        "$B/client/perfsnapctl" status --format json > "$T/s.json" 2>/dev/null
        python3 - "$T/s.json" "$m" "$rss" "$hwm" "$cpu" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); s = s.get("parameters", s)
print("%4s %10s %10s %12d %12d %12d %12d %10d %6d %7d %8s" % (sys.argv[2], sys.argv[3], sys.argv[4], s["heap_bytes"],
      s["sqlite_memory_bytes"], s["ingest_cache_bytes"], s["tasks_bytes"], s["samples"], s["lost"],
      s["dropped_samples"], sys.argv[5]))
PY
done
if command -v sqlite3 >/dev/null; then
        echo "hours by cgroup (start, blocks, markers, bytes):"
        sqlite3 "file:$T/db?mode=ro" "SELECT datetime(start_ns / 1000000000, 'unixepoch'), count(*), sum(data = x'00'),
                sum(length(data)) FROM sample_blocks WHERE level = 7 GROUP BY start_ns"
        echo "stack nodes and frames interned (ids are never reused), generations of each:"
        sqlite3 "file:$T/db?mode=ro" "SELECT 'stack nodes', max(last_id), count(DISTINCT gen) FROM stack_blocks
                UNION ALL SELECT 'frames', max(last_id), count(DISTINCT gen) FROM frame_blocks"
fi
