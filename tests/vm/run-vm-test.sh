#!/bin/sh
# Host side of one VM scenario, as a meson test: skips (77) where qemu or a
# kernel image is missing; otherwise boots the VM, shows the guest's
# output, and fails unless every check passed.
set -u
SCENARIO=$1
HERE=$(dirname "$(readlink -f "$0")")
command -v qemu-system-x86_64 >/dev/null 2>&1 || { echo "SKIP: qemu-system-x86_64 not installed (sh .ci/install-deps --vm)"; exit 77; }
ls /boot/vmlinuz-* >/dev/null 2>&1 || { echo "SKIP: no kernel image in /boot (sh .ci/install-deps --vm)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (qemu 9p export of /)"; exit 77; }
SHARE=$(mktemp -d /tmp/perfsnapd-vm.XXXXXX)
trap 'rm -rf "$SHARE"' EXIT
VMRUN_EXPORTS="$SOURCE_DIR $BUILD_DIR" "$HERE/vmrun" "$HERE/$SCENARIO" "$SHARE" "BUILD_DIR=$BUILD_DIR" "SOURCE_DIR=$SOURCE_DIR" > "$SHARE/out.txt" 2>&1
rc=$?
cat "$SHARE/out.txt"
npass=$(grep -c '^PASS:' "$SHARE/out.txt")
nfail=$(grep -c '^FAIL:' "$SHARE/out.txt")
echo "vm scenario $SCENARIO: $npass passed, $nfail failed (guest exit $rc)"
[ "$rc" = 0 ] && [ "$nfail" = 0 ] && [ "$npass" -gt 0 ]
