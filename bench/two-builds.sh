#!/bin/bash
# Two perfsnapd builds sampling the same workload at the same time.
#
#   bench/two-builds.sh BUILD_A BUILD_B [SECONDS] [WORKLOAD] [FREQ]
#
# Starts perfsnapd from each build directory with a private database (no
# kcore cache), runs bench/workload.sh WORKLOAD (default mixed) for
# SECONDS (default 40) at FREQ (default 999), stops both with SIGTERM and
# prints, for each: samples stored (its stop message), CPU from
# /proc/PID/task/*/schedstat over the workload, CPU per sample, peak RSS
# (VmHWM) and the database's size after the stop. Both see the same
# machine, so their difference is the builds'. CONF_A and CONF_B, if
# set, are configuration lines added to A's or B's file (e.g.
# CONF_B='drain_interval = 1s'), to compare settings with one build given
# twice. Needs root.
set -u
A=$(readlink -f "${1:?usage: two-builds.sh BUILD_A BUILD_B [SECONDS] [WORKLOAD] [FREQ]}")
B=$(readlink -f "${2:?usage: two-builds.sh BUILD_A BUILD_B [SECONDS] [WORKLOAD] [FREQ]}")
SECS=${3:-40}
KIND=${4:-mixed}
FREQ=${5:-999}
HERE=$(dirname "$(readlink -f "$0")")
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 77; }

T=$(mktemp -d /tmp/perfsnapd-two.XXXXXX)
trap 'kill -KILL $PA $PB 2>/dev/null; rm -rf "$T"' EXIT
for x in a b; do
        cat > "$T/$x.conf" <<CONF
database = $T/$x.db
cache_dir =
socket = $T/$x.sock
frequency_hz = $FREQ
callchain_depth = 127
CONF
done
printf '%b\n' "${CONF_A:-}" >> "$T/a.conf"
printf '%b\n' "${CONF_B:-}" >> "$T/b.conf"
cpu_of() { cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.4f", s / 1e9 }'; }
"$A/daemon/perfsnapd" --config "$T/a.conf" > "$T/a.log" 2>&1 & PA=$!
"$B/daemon/perfsnapd" --config "$T/b.conf" > "$T/b.log" 2>&1 & PB=$!
sleep 1.5
a0=$(cpu_of $PA); b0=$(cpu_of $PB)
bash "$HERE/workload.sh" "$KIND" "$SECS"
sleep 1
a1=$(cpu_of $PA); b1=$(cpu_of $PB)
ra=$(awk '/VmHWM/ { print $2 }' /proc/$PA/status); rb=$(awk '/VmHWM/ { print $2 }' /proc/$PB/status)
kill -TERM $PA $PB; wait $PA $PB
for x in a b; do
        case $x in a) dir=$A c0=$a0 c1=$a1 rss=$ra ;; b) dir=$B c0=$b0 c1=$b1 rss=$rb ;; esac
        n=$(sed -n 's/.*Stopped: \([0-9]*\) samples stored.*/\1/p' "$T/$x.log")
        python3 -c "import sys; d, n, c0, c1, rss, db = sys.argv[1:]; n = int(n); c = float(c1) - float(c0)
print(f'{d}: {n} samples, CPU {c:.3f} s, {c * 1e6 / max(n, 1):.2f} us/sample, peak RSS {int(rss)} kB, database {int(db)} bytes')" \
                "$dir" "$n" "$c0" "$c1" "$rss" "$(du -cb "$T/$x".db* | tail -1 | cut -f1)"
done
