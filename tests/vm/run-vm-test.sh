#!/bin/sh
# Host side of one VM scenario, as a meson test: skips (77) where qemu or a
# kernel image is missing; otherwise boots the VM, shows the guest's
# output, and fails unless every check passed.
#
# A scenario that needs state to survive a reboot says so in a line
#   # vm-boots: N
# It is then booted N times in a row with BOOT=1 .. BOOT=N in its
# environment and the same RESULT_DIR at /share, so boot 2 finds what
# boot 1 left there. Each boot must exit 0, print a PASS: line and no
# FAIL: line. VM_RESULT_DIR, if set, is used as RESULT_DIR and kept (to
# look at the database or snapshots afterwards); otherwise a temporary
# directory is removed at the end.
set -u
SCENARIO=$1
HERE=$(dirname "$(readlink -f "$0")")
command -v qemu-system-x86_64 >/dev/null 2>&1 || { echo "SKIP: qemu-system-x86_64 not installed (sh .ci/install-deps --vm)"; exit 77; }
ls /boot/vmlinuz-* >/dev/null 2>&1 || { echo "SKIP: no kernel image in /boot (sh .ci/install-deps --vm)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (qemu 9p export of /)"; exit 77; }
BOOTS=$(sed -n 's/^# vm-boots: *\([0-9][0-9]*\) *$/\1/p' "$HERE/$SCENARIO" | head -1)
BOOTS=${BOOTS:-1}
if [ -n "${VM_RESULT_DIR:-}" ]; then
        mkdir -p "$VM_RESULT_DIR" || exit 1
        SHARE=$(readlink -f "$VM_RESULT_DIR")
else
        SHARE=$(mktemp -d /tmp/perfsnapd-vm.XXXXXX)
        trap 'rm -rf "$SHARE"' EXIT
fi
ok=1
for boot in $(seq 1 "$BOOTS"); do
        # A single boot keeps its output in out.txt, as before.
        out=$SHARE/out.txt
        [ "$BOOTS" = 1 ] || { out=$SHARE/out-boot$boot.txt; echo "=== boot $boot of $BOOTS"; }
        VMRUN_EXPORTS="$SOURCE_DIR $BUILD_DIR" "$HERE/vmrun" "$HERE/$SCENARIO" "$SHARE" \
                "BUILD_DIR=$BUILD_DIR" "SOURCE_DIR=$SOURCE_DIR" "BOOT=$boot" > "$out" 2>&1
        rc=$?
        cat "$out"
        npass=$(grep -c '^PASS:' "$out")
        nfail=$(grep -c '^FAIL:' "$out")
        [ "$BOOTS" = 1 ] || echo "boot $boot: $npass passed, $nfail failed (guest exit $rc)"
        [ "$rc" = 0 ] && [ "$nfail" = 0 ] && [ "$npass" -gt 0 ] || ok=0
        tpass=$(( ${tpass:-0} + npass )); tfail=$(( ${tfail:-0} + nfail ))
done
if [ "$BOOTS" = 1 ]; then
        echo "vm scenario $SCENARIO: $tpass passed, $tfail failed (guest exit $rc)"
else
        echo "vm scenario $SCENARIO: $tpass passed, $tfail failed in $BOOTS boots"
fi
[ "$ok" = 1 ]
