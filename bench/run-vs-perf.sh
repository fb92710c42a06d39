#!/bin/bash
# Side-by-side cost of perfsnapd and perf on one workload, in one run.
#
#   bench/run-vs-perf.sh BUILD_DIR [SECONDS] [FREQ] [WORKLOAD]
#
# Starts perfsnapd (from BUILD_DIR) and `perf record -a -g` at the same
# frequency at the same time, runs bench/workload.sh WORKLOAD (steady,
# the default: dd and yes; mixed: gcc, find and pipelines; idle) for
# SECONDS (default 25), stops both, then runs `perf report` on perf's
# file. Prints the CPU each side spent, the ratios the targets are stated
# in, and the database's bytes per sample after perfsnapd's clean stop
# (every file: main, WAL, shm), and the daemon's CPU by thread (the
# draining loop, the function-table worker psd-symbols, the others).
# Needs root and perf. With KEEP_DB=PATH the database is copied there
# after the stop. With CACHE_DIR=PATH the daemon's cache directory is PATH
# (kept between runs: the function tables of an earlier run are there, as
# for a daemon that has run a while) instead of an empty one. CONF, if
# set, is configuration lines added to the daemon's file (e.g.
# CONF='ring_buffer_pages = 128').
set -u
B=$(readlink -f "${1:?usage: run-vs-perf.sh BUILD_DIR [SECONDS] [FREQ] [WORKLOAD]}")
SECS=${2:-25}
FREQ=${3:-999}
WORKLOAD=${4:-steady}
HERE=$(dirname "$(readlink -f "$0")")
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 77; }
command -v perf >/dev/null || { echo "needs perf" >&2; exit 77; }

T=$(mktemp -d /tmp/perfsnapd-bench.XXXXXX)
trap 'kill $WL 2>/dev/null; [ -n "${DPID:-}" ] && kill -KILL $DPID 2>/dev/null; rm -rf "$T"' EXIT
cat > "$T/conf" <<CONF
database = $T/db
cache_dir = ${CACHE_DIR:-$T/cache}
socket = $T/sock
frequency_hz = $FREQ
callchain_depth = 127
CONF
printf '%b\n' "${CONF:-}" >> "$T/conf"
export PERFSNAPD_SOCKET=$T/sock

# CPU time of all threads of a live process, in seconds with ns precision
# (/proc/PID/task/*/schedstat: first field is time on a CPU in ns).
cpu_of() { cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.4f", s / 1e9 }'; }
# threads_of PID: "TID NAME NS" for each thread (the workers are named
# psd-*; the draining loop has the daemon's name).
threads_of() { for t in /proc/"$1"/task/*; do echo "${t##*/} $(cat "$t/comm") $(cut -d' ' -f1 "$t/schedstat")"; done; }

"$B/daemon/perfsnapd" --config "$T/conf" > "$T/daemon.log" 2>&1 &
DPID=$!
for _ in $(seq 100); do "$B/client/perfsnapctl" status >/dev/null 2>&1 && break; sleep 0.1; done
d_start=$(cpu_of $DPID)
threads_of $DPID > "$T/threads.start"

# perf record's whole CPU time, its exit-time build-id collection included
# (its child is `sleep`, which costs nothing).
( TIMEFORMAT='%U %S'; time perf record -q -a -g -F "$FREQ" -o "$T/perf.data" -- sleep "$SECS" 2> "$T/perf-record.err" ) 2> "$T/perf-record.time" &
PPID_REC=$!
sleep 0.2
bash "$HERE/workload.sh" "$WORKLOAD" "$SECS" & WL=$!
wait $PPID_REC
rec_cpu=$(awk '{ printf "%.3f", $1 + $2 }' "$T/perf-record.time")
kill $WL 2>/dev/null; wait $WL 2>/dev/null
sleep 0.5

"$B/client/perfsnapctl" status --format json > "$T/status.json"
d_end=$(cpu_of $DPID)
threads_of $DPID > "$T/threads.end"
rss_kb=$(awk '/VmHWM/ { print $2 }' /proc/$DPID/status)
kill -TERM $DPID; wait $DPID; DPID=
db_bytes=$(du -b "$T"/db* | awk '{ s += $1 } END { print s }')
[ -n "${KEEP_DB:-}" ] && cp "$T/db" "$KEEP_DB"
stored=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select coalesce(sum(n_samples), 0) from sample_blocks where level = 0').fetchone()[0])" "$T/db")
# Where the bytes are, by table and index (sqlite3's dbstat, if the
# shell has it).
tables=$(sqlite3 "$T/db" "SELECT name || ' ' || sum(pgsize) FROM dbstat GROUP BY name ORDER BY sum(pgsize) DESC LIMIT 6" 2>/dev/null | paste -sd, -)
nodes=$(python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute('select coalesce(sum(n),0) from stack_blocks').fetchone()[0], c.execute('select coalesce(sum(n),0) from frame_blocks').fetchone()[0])" "$T/db")

# perf report: the symbolized answer a perf user reads
TIMEFORMAT='%U %S'
rep=$( { time perf report -i "$T/perf.data" --no-children --sort comm,dso,sym --stdio > "$T/report.txt" 2>/dev/null; } 2>&1 )
rep_cpu=$(echo "$rep" | awk '{ printf "%.3f", $1 + $2 }')
perf_samples=$(perf script -i "$T/perf.data" -F period 2>/dev/null | wc -l)

THREADS_START=$T/threads.start THREADS_END=$T/threads.end \
python3 - "$T/status.json" "$d_start" "$d_end" "$rec_cpu" "$rep_cpu" "$rss_kb" "$SECS" "$FREQ" "$perf_samples" "$(stat -c %s "$T/perf.data")" "$db_bytes" "$stored" "$nodes" "$WORKLOAD" "$tables" <<'PY'
import json, sys
st = json.load(open(sys.argv[1])); st = st.get("parameters", st)
d0, d1, rec, rep, rss_kb, secs, freq, psamples, pbytes, dbbytes, stored, nodes, workload, tables = sys.argv[2:]
d = float(d1) - float(d0); rec = float(rec); rep = float(rep)
samples = st["samples"]; lost = st["lost"]
perf_total = rec + rep
print(f"workload: {workload}, {secs} s, {freq} Hz, {st['cpus']} CPUs, event {st['event']}")
print(f"perfsnapd: {samples} samples stored, {lost} lost, daemon CPU {d:.3f} s "
      f"({1e6 * d / max(samples, 1):.2f} us/sample), peak RSS {int(rss_kb) / 1024:.1f} MiB, database {int(dbbytes) / 1e6:.1f} MB")
import os
def threads(path):
    return {l.split()[0]: (l.split()[1], int(l.split()[2])) for l in open(path) if len(l.split()) == 3}
t0, t1 = threads(os.environ["THREADS_START"]), threads(os.environ["THREADS_END"])
by = {}
for tid, (name, ns) in t1.items():
    by[name] = by.get(name, 0) + ns - t0.get(tid, (name, 0))[1]
print("daemon CPU by thread: " + ", ".join(f"{n} {v / 1e9:.3f} s" for n, v in sorted(by.items(), key=lambda x: -x[1])))
n_nodes, n_frames = nodes.split()
print(f"database after the clean stop: {int(stored)} samples in {int(dbbytes)} bytes = {int(dbbytes) / max(int(stored), 1):.2f} bytes/sample "
      f"({n_nodes} stack nodes, {n_frames} frames)")
if tables:
    print(f"pages by table: {tables.replace(',', ', ')}")
print(f"perf: {psamples} samples, perf record CPU {rec:.3f} s, perf report CPU {rep:.3f} s, total {perf_total:.3f} s, perf.data {int(pbytes) / 1e6:.1f} MB")
ratio = d / perf_total if perf_total else float("inf")
print(f"ratio perfsnapd / perf (record + report): {ratio:.3f}  (target <= 0.25)")
ok = ratio <= 0.25 and 1e6 * d / max(samples, 1) <= 1.0 and lost == 0 and int(rss_kb) <= 64 * 1024
print("targets:", "met" if ok else "NOT met",
      f"[ratio {ratio:.3f} <= 0.25, {1e6 * d / max(samples, 1):.2f} us/sample <= 1, lost {lost} == 0, RSS {int(rss_kb) / 1024:.1f} MiB <= 64]")
PY
