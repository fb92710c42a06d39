#!/bin/sh
# Cost of one kcore snapshot: perf's `perf buildid-cache --kcore
# /proc/kcore` against perfsnapd's `perfsnapctl snapshot`, side by side in
# one boot of the VM (tests/vm/vmrun: Debian's kernel under qemu TCG, the
# only place here with modules and /proc/kcore).
#
#   bench/kcore-snapshot.sh BUILD_DIR [ROUNDS]
#
# Each round (default 5) first loads one more module, so that neither
# tool can answer "the same kcore is already there": perf writes into a
# fresh build-id directory; perfsnapd runs with snapshot_delay = 1h (the
# load does not trigger a snapshot by itself) and `perfsnapctl snapshot`
# must answer "created". Both copies are then taken of the same kernel
# and module layout. Per round: wall time of the command (perfsnapctl's
# includes the request and the wait for the snapshot), bytes on disk
# (du -sb), PT_LOAD segments of the kcore file. Without a perfsnapd that
# has `perfsnapctl snapshot`, only perf's half is measured.
# Needs root and what tests/vm/vmrun needs.
set -u

if [ -z "${KCORE_BENCH_GUEST:-}" ]; then
        B=$(readlink -f "${1:?usage: kcore-snapshot.sh BUILD_DIR [ROUNDS]}")
        HERE=$(dirname "$(readlink -f "$0")")
        [ "$(id -u)" = 0 ] || { echo "needs root (qemu 9p export of /)" >&2; exit 77; }
        SHARE=$(mktemp -d /tmp/kcore-bench.XXXXXX)
        trap 'rm -rf "$SHARE"' EXIT
        VMRUN_EXPORTS="$(dirname "$HERE") $B" "$HERE/../tests/vm/vmrun" "$0" "$SHARE" \
                "BUILD_DIR=$B" "ROUNDS=${2:-5}" KCORE_BENCH_GUEST=1
        exit $?
fi

# --- inside the VM
T=/tmp/kcore-bench
mkdir -p $T
export HOME=$T/home      # perf must not write to ~/.debug
now_ns() { date +%s%N; }
ploads() { readelf -lW "$1" 2>/dev/null | grep -c '^ *LOAD '; }
pyget() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
echo "kernel $(uname -r), $(nproc) CPUs, $(wc -l < /proc/modules) modules loaded; qemu TCG (no KVM)"
t=$(now_ns); awk 'BEGIN { for (i = 0; i < 3000000; i++) s += i }'
echo "speed reference: an awk loop of 3e6 iterations takes $(( ($(now_ns) - t) / 1000000 )) ms (about 80 ms natively)"

meson install -C "$BUILD_DIR" --no-rebuild --quiet > $T/install.log 2>&1 || { cat $T/install.log; exit 1; }
cat > $T/conf <<CONF
database = $T/db
socket = $T/sock
cache_dir = $T/cache
snapshot_delay = 1h
rescan_interval = never
CONF
export PERFSNAPD_SOCKET=$T/sock
DAEMON=
if perfsnapd --check-config --config $T/conf > $T/check.out 2>&1; then
        perfsnapd --config $T/conf > $T/log 2>&1 &
        DPID=$!
        for _ in $(seq 1 100); do perfsnapctl status >/dev/null 2>&1 && break; sleep 0.1; done
        # The start-up snapshot is taken by itself: wait for it.
        for _ in $(seq 1 300); do
                perfsnapctl status --format json 2>/dev/null | grep -q '"snapshots_created": *[1-9]' && { DAEMON=1; break; }
                sleep 0.1
        done
        [ -n "$DAEMON" ] || { echo "perfsnapd took no start-up snapshot; its log:"; tail -5 $T/log; }
else
        echo "perfsnapd does not take snapshots yet (--check-config: $(grep -i error $T/check.out | head -1)): perf's half only"
fi

# One module more per round; these are in Debian's kernel and harmless.
next_module() {
        for m in dummy nbd zram brd null_blk tun veth ifb vcan nlmon loop; do
                grep -q "^$m " /proc/modules && continue
                modprobe "$m" 2>/dev/null && { echo "$m"; return 0; }
        done
        return 1
}

printf '%-5s %-8s | %-28s | %-36s\n' round module "perf: ms bytes PT_LOAD" "perfsnapd: ms bytes PT_LOAD result"
: > $T/rows
for r in $(seq 1 "$ROUNDS"); do
        m=$(next_module) || { echo "no module left to load"; break; }
        nmod=$(wc -l < /proc/modules)
        rm -rf $T/perf
        t=$(now_ns)
        perf --buildid-dir $T/perf buildid-cache --kcore /proc/kcore > $T/perf.out 2>&1 \
                || { echo "perf buildid-cache failed:"; cat $T/perf.out; }
        pms=$(( ($(now_ns) - t) / 1000000 ))
        pdir=$(find $T/perf -name kcore -exec dirname {} \; | head -1)
        pbytes=$(du -sb "$pdir" | cut -f1)
        pload=$(ploads "$pdir/kcore")
        sms=- sbytes=- sload=- res=-
        if [ -n "$DAEMON" ]; then
                t=$(now_ns)
                perfsnapctl snapshot --format json > $T/snap.json 2>&1
                sms=$(( ($(now_ns) - t) / 1000000 ))
                res=$(pyget $T/snap.json 'd["result"]')
                sdir=$(pyget $T/snap.json 'd["path"]')
                sbytes=$(du -sb "$sdir" | cut -f1)
                sload=$(ploads "$sdir/kcore")
                [ "$res" = created ] || { echo "round $r: perfsnapctl snapshot: $(cat $T/snap.json)"; }
        fi
        printf '%-5s %-8s | %6s %10s %4s     | %6s %10s %4s %-9s\n' "$r" "$m" "$pms" "$pbytes" "$pload" "$sms" "$sbytes" "$sload" "$res"
        echo "$r $nmod $pms $pbytes $pload $sms $sbytes $sload $res" >> $T/rows
done

python3 - $T/rows <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
if not rows:
    sys.exit(1)
med = lambda i: statistics.median(float(r[i]) for r in rows) if all(r[i] != "-" for r in rows) else None
pm, pb, pl, sm, sb, sl = (med(i) for i in (2, 3, 4, 5, 6, 7))
print(f"{len(rows)} rounds, {rows[0][1]}..{rows[-1][1]} modules loaded")
print(f"perf buildid-cache --kcore: median {pm:.0f} ms, {pb / 1e6:.1f} MB, {pl:.0f} PT_LOAD")
if sm is not None:
    created = sum(r[8] == "created" for r in rows)
    print(f"perfsnapctl snapshot:       median {sm:.0f} ms, {sb / 1e6:.1f} MB, {sl:.0f} PT_LOAD; {created} of {len(rows)} created")
    print(f"perfsnapd / perf: time {sm / pm:.2f}, bytes {sb / pb:.2f}")
PY
rc=$?
[ -n "${DPID:-}" ] && kill "$DPID" && wait "$DPID"
exit $rc
