#!/bin/sh
# Module churn soak in the VM tier (the host kernel here has no loadable
# modules): boots tests/vm/vmrun with bench/soak-modules-guest.sh, which
# runs perfsnapd as a service for MINUTES while brd, null_blk, dummy and
# veth are loaded and unloaded in a loop and a client hammers the socket,
# and prints RSS, fds, database and cache bytes each minute, then PASS:/FAIL:
# lines on flatness. The guest runs under software emulation (tcg), so the
# daemon samples at its default 99 Hz.
#
#   bench/soak-modules.sh BUILD_DIR [MINUTES]
#
# MINUTES defaults to 90: the daemon's bounded caches fill for about the
# first 50 minutes (bench/RESULTS.md), so a shorter run's middle third can
# still be below the level its last third holds.
# Needs root, qemu-system-x86_64 and a kernel image (sh .ci/install-deps --vm).
set -u
B=$(readlink -f "${1:?usage: soak-modules.sh BUILD_DIR [MINUTES]}")
MIN=${2:-90}
HERE=$(dirname "$(readlink -f "$0")")
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 77; }
command -v qemu-system-x86_64 > /dev/null || { echo "needs qemu-system-x86_64" >&2; exit 77; }
OUT=$(mktemp /tmp/perfsnapd-soak-modules.XXXXXX)
VMRUN_TIMEOUT=$(( MIN * 60 + 600 )) VMRUN_EXPORTS="$B $(dirname "$HERE")" \
        "$(dirname "$HERE")/tests/vm/vmrun" "$HERE/soak-modules-guest.sh" "BUILD_DIR=$B" "MINUTES=$MIN" > "$OUT" 2>&1
rc=$?
cat "$OUT"
ok=0
[ "$rc" = 0 ] && grep -q '^PASS:' "$OUT" && ! grep -q '^FAIL:' "$OUT" && ok=1
rm -f "$OUT"
[ "$ok" = 1 ]
