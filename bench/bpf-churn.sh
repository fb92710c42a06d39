#!/bin/bash
# perfsnapd's CPU cost of BPF program churn, against the CPU of the churn
# itself and against perf recording the same churn, in one run.
#
#   bench/bpf-churn.sh BUILD_DIR [CYCLES] [ROUNDS]
#
# tests/integration/bpf-prog churn loads and unloads CYCLES (default 5000)
# tiny socket filters; perfsnapd sees each as a PERF_RECORD_KSYMBOL
# register and unregister and journals both. Each of ROUNDS (default 5)
# rounds runs the churn twice:
#  1. under perfsnapd: the churn's CPU (user+sys of the child, which bash's
#     `time` takes from getrusage(RUSAGE_CHILDREN)) and the daemon's
#     (utime+stime from /proc/PID/stat) from just before the churn until
#     status shows all CYCLES registrations and unregistrations and the
#     commit after them, minus the daemon's idle rate over that time;
#  2. under `perf record -a -e cpu-clock -F 99 -g`: perf's CPU from just
#     before the churn until it has exited after SIGINT (its exit-time pass
#     over perf.data included), minus perf's idle rate and minus what its
#     exit costs after an idle recording.
# perfsnapd is stopped during the perf half and started again before the
# next round (same database): with two sessions receiving the kernel's
# KSYMBOL and BPF_EVENT records on a CPU, the records after the first come
# with a size that does not match their contents (see bench/RESULTS.md).
# The idle rates are measured before the rounds, over 3 s each. perfsnapd
# runs with its default frequency (99 Hz) and a ring buffer big enough to
# lose nothing. Needs root, perf and bpf().
set -u
B=$(readlink -f "${1:?usage: bpf-churn.sh BUILD_DIR [CYCLES] [ROUNDS]}")
CYCLES=${2:-5000}
ROUNDS=${3:-5}
IDLE_SECS=3
SETTLE_SECS=1.5
WAIT_SECS=30
PERF_TRIES=3
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 77; }
command -v perf >/dev/null || { echo "needs perf" >&2; exit 77; }
case "$CYCLES$ROUNDS" in *[!0-9]*) echo "CYCLES and ROUNDS are numbers" >&2; exit 2 ;; esac
if [ "$CYCLES" -lt 1 ] || [ "$ROUNDS" -lt 1 ]; then echo "CYCLES and ROUNDS must be >= 1" >&2; exit 2; fi

D=$B/daemon/perfsnapd
CTL=$B/client/perfsnapctl
BPF=$B/tests/integration/bpf-prog
for f in "$D" "$CTL" "$BPF"; do [ -x "$f" ] || { echo "$f is missing: build $B first" >&2; exit 1; }; done
"$BPF" churn --count 1 --prefix psnapbprobe > /dev/null
rc=$?
[ $rc = 77 ] && { echo "bpf() is not permitted here" >&2; exit 77; }
[ $rc = 0 ] || { echo "bpf-prog churn --count 1 failed with $rc" >&2; exit 1; }

TCK=$(getconf CLK_TCK)
T=$(mktemp -d /tmp/perfsnapd-bench.XXXXXX)
DPID=
PERF_PID=
PERF_JOB=
# shellcheck disable=SC2317  # run by the trap
cleanup() {
        [ -n "$PERF_PID" ] && kill -INT "$PERF_PID" 2>/dev/null
        [ -n "$PERF_JOB" ] && wait "$PERF_JOB" 2>/dev/null
        [ -n "$DPID" ] && { kill -KILL "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; }
        rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
        echo "bpf-churn: $*" >&2
        [ -f "$T/daemon.log" ] && { echo "--- daemon log:" >&2; tail -20 "$T/daemon.log" >&2; }
        exit 1
}

cat > "$T/conf" <<CONF
database = $T/db
cache_dir = $T/cache
socket = $T/sock
ring_buffer_pages = 2048
CONF
export PERFSNAPD_SOCKET=$T/sock

# utime + stime of all threads of a live process, in clock ticks
ticks() {
        local s
        read -r s < /proc/"$1"/stat || return 1
        s=${s##*) }
        # shellcheck disable=SC2086  # split the fields after "(comm) "
        set -- $s
        echo $(( ${12} + ${13} ))
}

# Reads the status fields named as arguments into the variables of the same
# names (the JSON is printed one key a line).
ksymbol_records='' cpus='' lost='' bad_records='' ksym_unknown_unregisters=''
ksyms_registered='' ksyms_unregistered='' ksyms_live=''
status() {
        local out
        out=$("$CTL" status --format json) || return 1
        eval "$(echo "$out" | awk -v want=" $* " '
                { k = $1; gsub(/[ \t":]/, "", k); v = $2; gsub(/[ \t,]/, "", v) }
                index(want, " " k " ") { print k "=" v }' FS=':')"
}

start_daemon() {
        "$D" --config "$T/conf" >> "$T/daemon.log" 2>&1 &
        DPID=$!
        for _ in $(seq 1 100); do "$CTL" status > /dev/null 2>&1 && break; sleep 0.1; done
        status ksymbol_records cpus || die "perfsnapd did not start"
        sleep $SETTLE_SECS      # past its start-up (kallsyms, first commit)
}
stop_daemon() {
        kill -TERM "$DPID"
        wait "$DPID" || die "perfsnapd exited with $? on SIGTERM"
        DPID=
}

# The churn as a child, its user+sys CPU in seconds to $T/churn.time.
churn() {
        local TIMEFORMAT='%3U %3S'
        { time "$BPF" churn --count "$CYCLES" --prefix "$1" > "$T/churn.out" 2> "$T/churn.err"; } 2> "$T/churn.time" ||
                die "bpf-prog churn failed: $(cat "$T/churn.err")"
        grep -q "^loaded=$CYCLES " "$T/churn.out" || die "bpf-prog churn printed: $(cat "$T/churn.out")"
}
churn_cpu() { awk '{ printf "%.3f", $1 + $2 }' "$T/churn.time"; }

# Waits until the daemon has seen CYCLES more registrations and
# unregistrations than $1 and $2 and has committed them: the commit after
# the status that shows them all.
wait_daemon() {
        local reg0=$1 unreg0=$2 deadline=$((SECONDS + WAIT_SECS)) c=''
        local ksyms_registered ksyms_unregistered commits lost
        while :; do
                status ksyms_registered ksyms_unregistered commits lost || die "perfsnapctl status failed"
                [ "$lost" = 0 ] || die "the daemon lost $lost records (ring_buffer_pages = 2048)"
                SEEN_REG=$((ksyms_registered - reg0))
                SEEN_UNREG=$((ksyms_unregistered - unreg0))
                [ -z "$c" ] && [ $SEEN_REG -ge "$CYCLES" ] && [ $SEEN_UNREG -ge "$CYCLES" ] && c=$commits
                [ -n "$c" ] && [ "$commits" -gt "$c" ] && return 0
                [ $SECONDS -lt $deadline ] ||
                        die "after $WAIT_SECS s the daemon has seen $SEEN_REG registrations and $SEEN_UNREG unregistrations of $CYCLES${c:+, and no commit after them}"
                sleep 0.05
        done
}

# Starts perf record in the background; PERF_PID is perf, PERF_JOB the
# subshell that times it (user+sys to $T/perf.time once perf exits).
start_perf() {
        rm -f "$T/perf.data" "$T/perf.pid"
        (
                TIMEFORMAT='%3U %3S'
                time {
                        perf record -q -a -e cpu-clock -F 99 -g -o "$T/perf.data" 2> "$T/perf.err" &
                        echo $! > "$T/perf.pid"
                        wait $!
                }
        ) 2> "$T/perf.time" &
        PERF_JOB=$!
        for _ in $(seq 1 100); do
                [ -s "$T/perf.pid" ] && [ -s "$T/perf.data" ] && break
                sleep 0.1
        done
        PERF_PID=$(cat "$T/perf.pid" 2>/dev/null)
        if [ -z "$PERF_PID" ] || ! kill -0 "$PERF_PID" 2>/dev/null; then
                die "perf record did not start: $(cat "$T/perf.err" 2>/dev/null)"
        fi
        sleep $SETTLE_SECS      # past its start-up (synthesized threads, maps, BPF programs)
}
# Stops perf; PERF_OK=1 if it exited normally (status 130 after SIGINT),
# else PERF_OK='' and PERF_FAIL says how (perf 6.1 sometimes aborts in its
# exit-time build-id pass, which cuts that pass short).
stop_perf() {
        local rc
        kill -INT "$PERF_PID"
        wait "$PERF_JOB"
        rc=$?
        PERF_PID=
        PERF_JOB=
        PERF_OK=
        PERF_FAIL="status $rc: $(grep -v '^assertion failed' "$T/perf.err" | tail -n 1)"
        case $rc in 0|130) PERF_OK=1 ;; esac
}
PERF_OK=
PERF_FAIL=
# perf's user+sys in s: the last line of the subshell's stderr is `time`'s
perf_cpu() { tail -n 1 "$T/perf.time" | awk '{ printf "%.3f", $1 + $2 }'; }

# ---- idle rates ----
notes=
start_daemon
[ "$ksymbol_records" = true ] || { echo "the kernel gives no PERF_RECORD_KSYMBOL: nothing to measure" >&2; exit 77; }
d0=$(ticks $DPID); t0=$EPOCHREALTIME
sleep $IDLE_SECS
d1=$(ticks $DPID); t1=$EPOCHREALTIME
D_IDLE=$(awk -v a="$d0" -v b="$d1" -v t0="$t0" -v t1="$t1" -v k="$TCK" 'BEGIN { printf "%.3f", 1000 * (b - a) / k / (t1 - t0) }')
stop_daemon

for attempt in $(seq 1 $PERF_TRIES); do
        start_perf
        p0=$(ticks "$PERF_PID"); t0=$EPOCHREALTIME
        sleep $IDLE_SECS
        p1=$(ticks "$PERF_PID"); t1=$EPOCHREALTIME
        stop_perf
        [ -n "$PERF_OK" ] && break
        notes="$notes
idle perf, attempt $attempt: perf record failed at exit ($PERF_FAIL); repeated"
done
[ -n "$PERF_OK" ] || die "perf record failed at exit $PERF_TRIES times ($PERF_FAIL)"
P_IDLE=$(awk -v a="$p0" -v b="$p1" -v t0="$t0" -v t1="$t1" -v k="$TCK" 'BEGIN { printf "%.3f", 1000 * (b - a) / k / (t1 - t0) }')
# perf's exit (its pass over perf.data for build-ids) after an idle recording
P_EXIT=$(awk -v p="$(perf_cpu)" -v b="$p1" -v k="$TCK" 'BEGIN { printf "%.0f", 1000 * (p - b / k) }')
P_START=$(awk -v a="$p0" -v k="$TCK" 'BEGIN { printf "%.0f", 1000 * a / k }')

echo "perfsnapd: $cpus CPUs, default frequency, ring_buffer_pages = 2048; $CYCLES load/unload cycles a round, $ROUNDS rounds; CPU times in clock ticks of $((1000 / TCK)) ms"
echo "idle: perfsnapd $D_IDLE ms/s, perf record $P_IDLE ms/s; perf's start-up $P_START ms (not counted), its exit after an idle recording $P_EXIT ms (subtracted)"
echo
printf '%5s %9s %10s %12s %8s %11s %8s %10s\n' round churn_ms daemon_ms daemon/churn perf_ms daemon/perf us/cycle perf_ksyms
: > "$T/rows"
for r in $(seq 1 "$ROUNDS"); do
        # 1. under perfsnapd
        start_daemon
        status ksyms_registered ksyms_unregistered bad_records ksym_unknown_unregisters || die "perfsnapctl status failed"
        reg0=$ksyms_registered; unreg0=$ksyms_unregistered; bad0=$bad_records; unk0=$ksym_unknown_unregisters
        d0=$(ticks $DPID); t0=$EPOCHREALTIME
        churn "psnapbd${r}_"
        wait_daemon "$reg0" "$unreg0"
        d1=$(ticks $DPID); t1=$EPOCHREALTIME
        c_cpu=$(churn_cpu)
        d_ms=$(awk -v a="$d0" -v b="$d1" -v t0="$t0" -v t1="$t1" -v k="$TCK" -v idle="$D_IDLE" \
                'BEGIN { printf "%.1f", 1000 * (b - a) / k - idle * (t1 - t0) }')
        status bad_records ksym_unknown_unregisters ksyms_live || die "perfsnapctl status failed"
        if [ "$SEEN_REG" != "$CYCLES" ] || [ "$SEEN_UNREG" != "$CYCLES" ] ||
           [ "$bad_records" != "$bad0" ] || [ "$ksym_unknown_unregisters" != "$unk0" ]; then
                notes="$notes
round $r: the daemon saw $SEEN_REG registrations, $SEEN_UNREG unregistrations ($((ksym_unknown_unregisters - unk0)) of unknown symbols), skipped $((bad_records - bad0)) malformed records; $ksyms_live symbols live after it"
        fi
        stop_daemon

        # 2. under perf record
        for attempt in $(seq 1 $PERF_TRIES); do
                start_perf
                p0=$(ticks "$PERF_PID"); t0=$EPOCHREALTIME
                churn "psnapbp${r}_"
                sleep 1         # as long as the daemon's commit interval; perf writes as it reads
                stop_perf
                t1=$EPOCHREALTIME
                [ -n "$PERF_OK" ] && break
                notes="$notes
round $r, attempt $attempt: perf record failed at exit ($PERF_FAIL); repeated"
        done
        [ -n "$PERF_OK" ] || die "perf record failed at exit $PERF_TRIES times ($PERF_FAIL)"
        p_ms=$(awk -v p="$(perf_cpu)" -v a="$p0" -v t0="$t0" -v t1="$t1" -v k="$TCK" -v idle="$P_IDLE" -v e="$P_EXIT" \
                'BEGIN { printf "%.1f", 1000 * (p - a / k) - idle * (t1 - t0) - e }')
        # Did perf get every register and unregister record of its round?
        perf report -D -i "$T/perf.data" > "$T/perf.dump" 2> /dev/null
        p_ksyms=$(grep -c "PERF_RECORD_KSYMBOL .* name bpf_prog_[0-9a-f]*_psnapbp${r}_" "$T/perf.dump")
        p_lost=$(awk '/^ *LOST events:/ { print $3 }' "$T/perf.dump")
        [ "${p_lost:-0}" = 0 ] || notes="$notes
round $r: perf lost records (LOST events: $p_lost)"

        echo "$r $c_cpu $d_ms $p_ms" >> "$T/rows"
        awk -v r="$r" -v c="$c_cpu" -v d="$d_ms" -v p="$p_ms" -v n="$CYCLES" -v pk="$p_ksyms" 'BEGIN {
                printf "%5d %9.1f %10.1f %12.2f %8.1f %11.2f %8.1f %10d\n", r, 1000 * c, d, d / (1000 * c), p, (p > 0 ? d / p : 0), 1000 * d / n, pk }'
done

python3 - "$T/rows" "$CYCLES" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
n = int(sys.argv[2])
c = [1000 * float(r[1]) for r in rows]
d = [float(r[2]) for r in rows]
p = [float(r[3]) for r in rows]
med = statistics.median
print("%5s %9.1f %10.1f %12.2f %8.1f %11.2f %8.1f" % (
    "med", med(c), med(d), med(x / y for x, y in zip(d, c)), med(p),
    med(x / y if y > 0 else 0 for x, y in zip(d, p)), 1000 * med(d) / n))
PY
echo
echo "perf_ksyms: PERF_RECORD_KSYMBOL records of the round's programs in perf.data (perf report -D), of $((2 * CYCLES))"
[ -n "$notes" ] && echo "notes:$notes"
exit 0
