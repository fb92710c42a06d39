#!/bin/bash
# A storm of BPF programs loaded and unloaded, perfsnapd and perf record
# side by side on a busy machine.
#
#   bench/bpf-storm.sh BUILD_DIR [CYCLES] [ROUNDS] [WORKLOAD] [SECONDS]
#
# Starts perfsnapd from BUILD_DIR at 999 Hz (otherwise its defaults: at 999
# Hz 1,024 pages a ring buffer, drains every 3 s) with a private database, and
# perf record -a -g -F 999 beside it; runs bench/workload.sh WORKLOAD (default
# mixed) for SECONDS (default 16), and ROUNDS (default 3) times CYCLES
# (default 8000) load/unload cycles of BUILD_DIR's bpf-prog during it.
# Prints, for each tool, the records it lost; for perfsnapd also the
# KSYMBOL records it processed, the records it rescued from ring buffers
# during long drains (rescued_records), its CPU time and peak RSS. Needs
# root and bpf().
set -u
B=$(readlink -f "${1:?usage: bpf-storm.sh BUILD_DIR [CYCLES] [ROUNDS] [WORKLOAD] [SECONDS]}")
CYCLES=${2:-8000}
ROUNDS=${3:-3}
WORKLOAD=${4:-mixed}
SECS=${5:-16}
HERE=$(dirname "$(readlink -f "$0")")
BPF_PROG=$B/tests/integration/bpf-prog
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 77; }
[ -x "$BPF_PROG" ] || { echo "no $BPF_PROG (build the tests)" >&2; exit 1; }
command -v perf >/dev/null || { echo "needs perf" >&2; exit 77; }

T=$(mktemp -d /tmp/perfsnapd-storm.XXXXXX)
trap 'kill $WL $PERF 2>/dev/null; [ -n "${DPID:-}" ] && kill -TERM $DPID 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
cat > "$T/conf" <<CONF
database = $T/db
cache_dir =
socket = $T/sock
frequency_hz = 999
CONF
export PERFSNAPD_SOCKET=$T/sock
"$B/daemon/perfsnapd" --config "$T/conf" > "$T/daemon.log" 2>&1 &
DPID=$!
for _ in $(seq 100); do "$B/client/perfsnapctl" status >/dev/null 2>&1 && break; sleep 0.1; done
perf record -a -g -F 999 -o "$T/perf.data" -- sleep $((SECS + 2)) > "$T/perf.log" 2>&1 &
PERF=$!
bash "$HERE/workload.sh" "$WORKLOAD" "$SECS" &
WL=$!
sleep 2
t0=$(date +%s.%N)
for i in $(seq 1 "$ROUNDS"); do
        "$BPF_PROG" churn --count "$CYCLES" --prefix "psnb$$_$i" >/dev/null || { echo "bpf-prog churn failed" >&2; exit 1; }
done
t1=$(date +%s.%N)
wait $WL
wait $PERF
sleep 1.5
field() { "$B/client/perfsnapctl" status --format json | python3 -c "import json,sys; print(json.load(sys.stdin).get('$1', '-'))"; }
cpu=$(awk '{ printf "%.2f", ($14 + $15) / '"$(getconf CLK_TCK)"' }' /proc/$DPID/stat)
hwm=$(awk '/VmHWM/ { print $2 }' /proc/$DPID/status)
echo "cycles: $((CYCLES * ROUNDS)) in $(python3 -c "print(round($t1 - $t0, 2))") s during $SECS s of $WORKLOAD"
echo "perfsnapd: lost $(field lost) records, ksym_records $(field ksym_records), rescued_records $(field rescued_records)," \
     "samples $(field samples), CPU $cpu s, peak RSS $hwm kB"
perf report -i "$T/perf.data" --stats 2>/dev/null | awk '
        $1 == "LOST" && $2 == "events:" { lost += $3 }
        $1 == "KSYMBOL" && $2 == "events:" && !k { k = $3 }
        $1 == "SAMPLE" && $2 == "events:" && !s { s = $3 }
        END { printf "perf record: lost %d records, KSYMBOL %d, samples %d\n", lost, k, s }'
