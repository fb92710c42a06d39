#!/bin/bash
# bench/hold.sh BUILDDIR [SECONDS]: the daemon at 999 Hz under
# `workload.sh mixed`, its database on a 64 MiB tmpfs. After 20 s the tmpfs
# is filled up but for 200 KiB and left full for SECONDS (default 120):
# every 10 s, what the daemon holds in memory (held_samples, held_bytes),
# what it dropped, its RSS and its CPU ticks in those 10 s (the first two
# lines are before the disk filled). Then the filler is removed and the
# write-out and the stop line are shown. Root only (perf events, mount).
set -eu
B=${1:?usage: hold.sh BUILDDIR [SECONDS]}
SECS=${2:-120}
B=$(cd "$B" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "hold.sh: needs root" >&2; exit 77; }

T=$(mktemp -d /tmp/perfsnapd-hold.XXXXXX)
M=$T/db
mkdir "$M"
mount -t tmpfs -o size=64m,mode=0755 tmpfs "$M"
DP= WP=
# Without errexit: a step that fails must not leave the daemon running.
cleanup() {
        set +e
        [ -n "$WP" ] && kill "$WP" 2> /dev/null
        [ -n "$DP" ] && kill -KILL "$DP" 2> /dev/null
        wait 2> /dev/null
        umount "$M"
        rm -rf "$T"
}
trap cleanup EXIT
cat > "$T/conf" <<EOF
database = $M/perfsnapd.db
cache_dir = $T/cache
socket = $T/sock
frequency_hz = 999
database_max_size = unlimited
hold_max_size = 256M
EOF
export PERFSNAPD_SOCKET=$T/sock
"$B/daemon/perfsnapd" --config "$T/conf" > "$T/log" 2>&1 &
DP=$!
sleep 3
"$HERE/workload.sh" mixed $((SECS + 60)) > /dev/null 2>&1 &
WP=$!

cpu() { awk '{ print $14 + $15 }' "/proc/$DP/stat"; }
field() {
        "$B/client/perfsnapctl" status --format json |
                python3 -c 'import json, sys; d = json.load(sys.stdin); print(" ".join(str(d[k]) for k in sys.argv[1:]))' "$@"
}
line() {
        local c1
        c1=$(cpu)
        printf '%4ss  held %s samples, %s bytes; dropped %s; RSS %s kB; CPU %s ticks\n' "$(( $(date +%s) - t0 ))" \
                $(field held_samples held_bytes dropped_samples) "$(awk '/VmRSS/ { print $2 }' "/proc/$DP/status")" \
                "$((c1 - c0))"
        c0=$c1
}

t0=$(date +%s); c0=$(cpu)
sleep 10; line
sleep 10; line
avail=$(df -B1 --output=avail "$M" | tail -1)
dd if=/dev/zero of="$M/filler" bs=4096 count=$(( (avail - 200 * 1024) / 4096 )) 2> /dev/null || true
echo "disk full"
for _ in $(seq 1 $((SECS / 10))); do
        sleep 10; line
done
rm -f "$M/filler"
echo "room again"
sleep 20; line
grep -E "held in memory|takes writes" "$T/log" | tail -2
kill $WP 2> /dev/null || true; wait $WP 2> /dev/null || true; WP=
kill -TERM $DP; wait $DP || true; DP=
grep "Stopped:" "$T/log"
