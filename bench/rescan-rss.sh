#!/bin/bash
# Peak memory of a rescan of the kernel code layout.
#
#   bench/rescan-rss.sh BUILD_DIR
#
# Starts perfsnapd (from BUILD_DIR) at 99 Hz with a private database and
# no cache directory, waits for it to settle, resets its VmHWM
# (/proc/PID/clear_refs), asks for three rescans (`perfsnapctl rescan`:
# modules and the dynamic symbols of kallsyms) and prints VmRSS before,
# VmHWM over the rescans, VmRSS after and each rescan's wall time (the
# client's). Needs root.
set -u
B=$(readlink -f "${1:?usage: rescan-rss.sh BUILD_DIR}")
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 77; }
O=$(mktemp -d /tmp/perfsnapd-rescan.XXXXXX)
trap '[ -n "${P:-}" ] && kill -KILL $P 2>/dev/null; rm -rf "$O"' EXIT
cat > $O/conf <<CONF
database = $O/db
cache_dir =
socket = $O/sock
frequency_hz = 99
CONF
$B/daemon/perfsnapd --config $O/conf > $O/log 2>&1 &
P=$!
for _ in $(seq 50); do $B/client/perfsnapctl --socket $O/sock status >/dev/null 2>&1 && break; sleep 0.1; done
sleep 2
before=$(awk '/VmRSS/ {print $2}' /proc/$P/status)
echo 5 > /proc/$P/clear_refs
for i in 1 2 3; do /usr/bin/time -f %e $B/client/perfsnapctl --socket $O/sock rescan > /dev/null 2>> $O/times; done
after=$(awk '/VmHWM/ {print $2}' /proc/$P/status); rss=$(awk '/VmRSS/ {print $2}' /proc/$P/status)
echo "$1: VmRSS before $before kB, VmHWM over 3 rescans $after kB (+$((after-before))), VmRSS after $rss kB, rescan s: $(paste -sd' ' $O/times)"
kill -TERM $P; wait $P; P=
