#!/bin/bash
# bench/offcpu.sh BUILD_DIR [ROUNDS] [LOOPS] [PLACE]: what off-CPU time
# costs a context-switch-heavy load. `perf bench sched pipe -l LOOPS` (two
# processes passing a token through pipes) runs ROUNDS times (default 5)
# in each setting, the settings taking turns so that drift of the machine
# hits them all alike. PLACE: "one" (default) pins both processes to CPU
# 1, so that every loop is two context switches and two waits on that
# CPU, nothing else; "any" lets them run on any CPU (then a wake-up
# often finds the other CPU idle, and what the idle CPU's wake-up costs
# the machine weighs more than the switches). The settings:
#   none    nothing else running
#   off     perfsnapd sampling CPU time (frequency_hz 99), offcpu = off
#   on      the same with offcpu = on (offcpu_clock = sched: the run
#           queue's clock)
#   mono    the same with offcpu_clock = monotonic (a clock read at
#           each end of a wait: what auto takes where the TSC is not the
#           clocksource)
#   empty   an empty BPF program on the same tracepoint (bench/sched-
#           switch-empty): the floor of any program there
#   perf    perf record -e sched:sched_switch -a -g (no perfsnapd)
# and prints per run the benchmark's usecs/op and the CPU time (user +
# system) the profiler's process spent meanwhile; then the medians, the
# slowdown of `on` against `off` and of `perf` against `none`. The
# daemon's CPU time counts its threads; the BPF program runs in the
# benchmark's context switches and shows in the benchmark's time. Needs
# root, perf (linux-perf) and tracefs (mounted here if it is not).
#
# PAIRS=SAMPLES: instead, with perfsnapd sampling CPU time (offcpu = off)
# all along, build/bench/offcpu-pairs SAMPLES times measures
# `perf bench sched pipe -l LOOPS` with no program, the empty one, and
# the daemon's program (daemon/offcpu.c) with either clock, in turns,
# and compares each with the "no program" run of the same turn: the
# program is what offcpu = on adds, and pairs close in time see through
# the drift that makes rounds a minute apart differ by 20 % on a VM.
set -eu
B=${1:?usage: bench/offcpu.sh BUILD_DIR [ROUNDS] [LOOPS]}
ROUNDS=${2:-5}
LOOPS=${3:-100000}
PLACE=${4:-one}
case $PLACE in
one) PIN="taskset -c 1" ;;
any) PIN= ;;
*) echo "PLACE: one or any"; exit 2 ;;
esac
B=$(cd "$B" && pwd)
PAIRS=${PAIRS:-}
D=$(mktemp -d /var/tmp/bench-offcpu.XXXXXX)
DPID=
cleanup() {
        [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
        rm -rf "$D"
}
trap cleanup EXIT
command -v perf > /dev/null || { echo "perf is not installed (linux-perf)"; exit 77; }
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
if pgrep -x perfsnapd > /dev/null; then
        echo "another perfsnapd is running: stop it first (it would be measured too)"
        exit 1
fi

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
HZ_TICK=$(getconf CLK_TCK)

start_daemon() {
        local offcpu=on clock=sched
        case $1 in
        off) offcpu=off ;;
        mono) clock=monotonic ;;
        esac
        rm -rf "$D/db" "$D/db-wal" "$D/db-shm" "$D/sock"
        cat > "$D/conf" <<EOC
database = $D/db
cache_dir =
socket = $D/sock
frequency_hz = 99
offcpu = $offcpu
offcpu_clock = $clock
EOC
        "$B/daemon/perfsnapd" --config "$D/conf" > "$D/daemon-$1.log" 2>&1 &
        DPID=$!
        for _ in $(seq 100); do
                PERFSNAPD_SOCKET=$D/sock "$B/client/perfsnapctl" status > /dev/null 2>&1 && break
                sleep 0.1
        done
        if [ "$offcpu" = on ]; then
                state=$(PERFSNAPD_SOCKET=$D/sock "$B/client/perfsnapctl" status --format json |
                        sed -n 's/^ *"offcpu\(_clock\)*": *"\(.*\)",*$/\2/p' | tr '\n' ' ')
                # (sched is monotonic on kernels without a run queue
                # clock to read: the log says so.)
                case $state in
                "on $clock ") ;;
                "on "*) echo "# offcpu_clock = $clock, but waits timed by: ${state#on }" >&2 ;;
                *) echo "offcpu did not start: '$state'"; exit 1 ;;
                esac
        fi
        sleep 1
}
stop_daemon() {
        kill "$DPID"
        wait "$DPID" 2>/dev/null || true
        DPID=
}

# bench SETTING: one run; prints "SETTING usecs/op profiler-cpu-ms".
bench() {
        local pid= t0=0 t1=0 us
        case $1 in
        off | on | mono) start_daemon "$1"; pid=$DPID ;;
        perf)
                perf record -q -e sched:sched_switch -a -g -o "$D/perf.data" > /dev/null 2>&1 &
                pid=$!
                sleep 1 ;;
        empty)
                "$B/bench/sched-switch-empty" "$B/bench/sched-switch-empty.bpf.o" > "$D/empty.out" 2>&1 &
                pid=$!
                for _ in $(seq 50); do grep -q attached "$D/empty.out" && break; sleep 0.1; done
                grep -q attached "$D/empty.out" || { cat "$D/empty.out"; exit 1; } ;;
        esac
        [ -n "$pid" ] && t0=$(cpu_ticks "$pid")
        us=$($PIN perf bench sched pipe -l "$LOOPS" 2>&1 | awk '/usecs\/op/ { print $1 }')
        [ -n "$pid" ] && t1=$(cpu_ticks "$pid")
        case $1 in
        off | on | mono)
                if [ "$1" = on ]; then
                        sleep 2.5       # two drains: the second takes the sums
                        PERFSNAPD_SOCKET=$D/sock "$B/client/perfsnapctl" status | grep -E "offcpu (waits|switches|full waits|no room|stacks taken)" |
                                tr -s ' ' | tr '\n' ';' > "$D/last-status"
                fi
                stop_daemon ;;
        perf)
                kill -INT "$pid"
                wait "$pid" 2>/dev/null || true
                rm -f "$D/perf.data" ;;
        empty)
                kill -INT "$pid"
                wait "$pid" 2>/dev/null || true ;;
        esac
        echo "$1 $us $(( (t1 - t0) * 1000 / HZ_TICK ))"
}

if [ -n "$PAIRS" ]; then
        echo "# offcpu-pairs, $PAIRS samples of perf bench sched pipe -l $LOOPS ($PLACE), perfsnapd with offcpu = off" \
                "running; $(nproc) CPUs, $(uname -r)"
        start_daemon off
        # Not exec: the trap stops the daemon.
        "$B/bench/offcpu-pairs" "$B/bench/sched-switch-empty.bpf.o" "$PAIRS" "$LOOPS" "$PLACE"
        exit
fi
echo "# ${PIN:+$PIN }perf bench sched pipe -l $LOOPS, $ROUNDS rounds; $(nproc) CPUs, $(uname -r)"
echo "# setting usecs/op profiler-cpu-ms"
for r in $(seq "$ROUNDS"); do
        for s in none off on mono empty perf; do
                bench "$s" | tee -a "$D/runs"
        done
        [ -f "$D/last-status" ] && echo "#   on: $(cat "$D/last-status")"
done
python3 - "$D/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    s, us, ms = line.split()
    runs.setdefault(s, []).append((float(us), int(ms)))
med = {s: statistics.median(u for u, _ in v) for s, v in runs.items()}
cpu = {s: statistics.median(m for _, m in v) for s, v in runs.items()}
for s in ("none", "off", "on", "mono", "empty", "perf"):
    us = [u for u, _ in runs[s]]
    print(f"{s:5} median {med[s]:.3f} usecs/op (min {min(us):.3f}, max {max(us):.3f}); profiler CPU median {cpu[s]} ms")
print(f"offcpu on vs off: {100 * (med['on'] / med['off'] - 1):+.1f} % time per op")
print(f"offcpu on vs none: {100 * (med['on'] / med['none'] - 1):+.1f} %")
print(f"offcpu on, monotonic clock vs off: {100 * (med['mono'] / med['off'] - 1):+.1f} %; vs the run queue's: "
      f"{100 * (med['mono'] / med['on'] - 1):+.1f} %")
print(f"empty program on sched_switch vs none: {100 * (med['empty'] / med['none'] - 1):+.1f} %")
print(f"perf record -e sched:sched_switch -a -g vs none: {100 * (med['perf'] / med['none'] - 1):+.1f} %")
PY
