#!/bin/bash
# bench/export.sh BUILD_DIR [HZ] [HOURS] [CPUS]: the cost of
# `perfsnapctl export` over a window of HOURS (default 1) of a machine of
# CPUS CPUs (default 2) sampled at HZ (default 99).
#
# Writes the history with bench-history (the daemon's own ingest path: a
# busy, mixed machine with process churn, see bench/bench-history.c),
# starts the real daemon on it, then exports the whole window in each
# format, 3 times each, and prints per run: wall time, the client's CPU
# time and peak RSS (getrusage of the child), and the daemon's peak RSS
# while answering (VmHWM, reset before each run through
# /proc/PID/clear_refs) and its RSS after. Needs root (bench-history reads
# kallsyms; the daemon opens perf events).
set -eu
B=${1:?usage: bench/export.sh BUILD_DIR [HZ] [HOURS] [CPUS]}
HZ=${2:-99}
HOURS=${3:-1}
CPUS=${4:-2}
B=$(cd "$B" && pwd)
D=$(mktemp -d /var/tmp/bench-export.XXXXXX)
DPID=
cleanup() {
        [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
        rm -rf "$D"
}
trap cleanup EXIT

SAMPLES=$(( HZ * CPUS * 3600 * HOURS ))
echo "# $SAMPLES samples: $HOURS h of $CPUS CPUs at $HZ Hz (bench-history)"
"$B/bench/bench-history" "$D/h.db" "$SAMPLES" "$CPUS" "$HZ" > "$D/history.txt" 2>&1 ||
        { cat "$D/history.txt"; exit 1; }
grep -E "^wrote|^database" "$D/history.txt"

cat > "$D/conf" <<EOF
database = $D/h.db
cache_dir = $D/cache
socket = $D/sock
frequency_hz = $HZ
EOF
"$B/daemon/perfsnapd" --config "$D/conf" > "$D/daemon.log" 2>&1 &
DPID=$!
export PERFSNAPD_SOCKET=$D/sock
for _ in $(seq 100); do
        "$B/client/perfsnapctl" status > /dev/null 2>&1 && break
        sleep 0.1
done

kb() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$DPID/status"; }

# run FORMAT SUFFIX: one export, timed.
run() {
        echo 5 > "/proc/$DPID/clear_refs"
        python3 - "$B/client/perfsnapctl" "$D/out$2" "${HOURS}h" > "$D/run.txt" <<'PY'
import resource, subprocess, sys, time
exe, out, since = sys.argv[1:4]
t = time.monotonic()
rc = subprocess.call([exe, "export", "--since", since, "-o", out], stderr=subprocess.DEVNULL)
wall = time.monotonic() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(rc, f"{wall:.3f}", f"{r.ru_utime + r.ru_stime:.3f}", r.ru_maxrss // 1024)
PY
        read -r rc wall cpu crss < "$D/run.txt"
        [ "$rc" = 0 ] || { echo "export --format $1 failed"; exit 1; }
        printf "%-7s %8s s %8s s %8s MB %9s MB %9s MB %10s B\n" "$1" "$wall" "$cpu" "$crss" \
                "$(( $(kb VmHWM) / 1024 ))" "$(( $(kb VmRSS) / 1024 ))" "$(du -sb "$D/out$2" | cut -f1)"
}

printf "%-7s %10s %10s %11s %12s %12s %12s\n" format wall "client CPU" "client RSS" "daemon peak" "daemon after" size
for i in 1 2 3; do
        run pprof .pb.gz
        run html .html
        run svg .svg
        run folded .folded
        run speedscope .speedscope.json
        run perf.data .perf.data
done
"$B/client/perfsnapctl" export --since "${HOURS}h" -o "$D/x.svg" 2>&1 >/dev/null | tail -1
