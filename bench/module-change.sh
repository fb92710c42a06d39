#!/bin/bash
# Time from a module change being seen to the layout being updated and the
# change journaled (committed), with many modules loaded.
#
#   bench/module-change.sh BUILD_DIR [MODULES] [SECTIONS] [ROUNDS]
#
# Builds a synthetic root with MODULES modules (default 120) of SECTIONS
# sysfs sections each (default 40; Debian's modules have 20-50), starts
# perfsnapd on it, then ROUNDS times (default 40) makes one more module
# appear or vanish and asks for a rescan. perfsnapd measures the span from
# reading proc/modules to the commit of the journal entry (status
# last_change_ns); that span is the same code path an add uevent takes,
# minus the datagram. Every journal entry carries MODULES x SECTIONS
# section-map records. Needs root (perf events).
set -u
B=$(readlink -f "${1:?usage: module-change.sh BUILD_DIR [MODULES] [SECTIONS] [ROUNDS]}")
NMOD=${2:-120}
NSEC=${3:-40}
ROUNDS=${4:-40}
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 77; }

T=$(mktemp -d /tmp/perfsnapd-bench.XXXXXX)
trap '[ -n "${DPID:-}" ] && kill -KILL $DPID 2>/dev/null; rm -rf "$T"' EXIT
R=$T/root
mkdir -p "$R/proc/sys/kernel/random" "$R/sys/kernel" "$R/sys/module"
cat /proc/kallsyms > "$R/proc/kallsyms"
cp /sys/kernel/notes "$R/sys/kernel/notes"
echo 6.1.0-bench > "$R/proc/sys/kernel/osrelease"
cat /proc/sys/kernel/random/boot_id > "$R/proc/sys/kernel/random/boot_id"

mkmod() {       # NAME INDEX
        local d=$R/sys/module/$1 base=$((0xffffffffc0000000 + $2 * 0x100000))
        mkdir -p "$d/sections"
        for s in $(seq 0 $((NSEC - 1))); do
                printf '0x%016x\n' $((base + s * 0x100)) > "$d/sections/.sec$s"
        done
        echo "$1 $((NSEC * 0x100)) 0 - Live $(printf '0x%016x' $base)"
}
: > "$T/modules"
for i in $(seq 1 "$NMOD"); do mkmod "mod$i" "$i" >> "$T/modules"; done
extra=$(mkmod extra 0)
cp "$T/modules" "$R/proc/modules"

cat > "$T/conf" <<CONF
database = $T/db
cache_dir = $T/cache
socket = $T/sock
root = $R
rescan_interval = never
CONF
export PERFSNAPD_SOCKET=$T/sock
"$B/daemon/perfsnapd" --config "$T/conf" > "$T/log" 2>&1 &
DPID=$!
for _ in $(seq 1 100); do "$B/client/perfsnapctl" status >/dev/null 2>&1 && break; sleep 0.1; done

field() { "$B/client/perfsnapctl" status --format json | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
: > "$T/times"
for r in $(seq 1 "$ROUNDS"); do
        if [ $((r % 2)) = 1 ]; then { echo "$extra"; cat "$T/modules"; } > "$R/proc/modules"; else cp "$T/modules" "$R/proc/modules"; fi
        "$B/client/perfsnapctl" rescan > /dev/null || { echo "rescan failed"; cat "$T/log"; exit 1; }
        field last_change_ns >> "$T/times"
done
events=$(field layout_events)
[ -n "${VERBOSE:-}" ] && cat -n "$T/times"
python3 - "$T/times" "$NMOD" "$NSEC" "$events" <<'EOF'
import sys
t = sorted(int(x) / 1e6 for x in open(sys.argv[1]))
n = len(t)
print(f"modules loaded: {sys.argv[2]} (+1), sections each: {sys.argv[3]}; journal entries: {sys.argv[4]}, records per entry: {(int(sys.argv[2]) + 1) * int(sys.argv[3])} or less")
print(f"change -> journaled, {n} changes: median {t[n // 2]:.2f} ms, p90 {t[int(n * 0.9)]:.2f} ms, max {t[-1]:.2f} ms (target < 10 ms)")
EOF
