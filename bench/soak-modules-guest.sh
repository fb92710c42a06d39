#!/bin/sh
# Guest half of bench/soak-modules.sh: runs inside tests/vm/vmrun (systemd
# as PID 1, Debian's kernel, real modules). Installs perfsnapd from
# BUILD_DIR, starts the service with a 10-minute retention and a 200 MiB
# snapshot cache, and for MINUTES loads and unloads brd, null_blk, dummy and
# veth in a loop (each load and unload is a layout change: a journal entry
# and a kcore snapshot) while a client loops over query, modules, events,
# ksyms, status and cache list. Prints a table each minute: the daemon's
# VmRSS and VmHWM, fds, database bytes (file + WAL), snapshot cache bytes,
# module loads and unloads tracked, client calls made and failed, and where
# the memory is by status: malloc's heap in use (heap_bytes), sqlite's,
# and the bounded caches (ingest, store, tasks) together.
# Environment: BUILD_DIR, MINUTES (default 20).
set -u
MIN=${MINUTES:-20}
D=/tmp/soak
mkdir -p $D
meson install -C "$BUILD_DIR" --no-rebuild --quiet > $D/install.log 2>&1 || { cat $D/install.log; echo "FAIL: meson install"; exit 1; }
systemd-sysusers > /dev/null 2>&1
rm -rf /var/lib/perfsnapd /var/cache/perfsnapd
conf=$(systemctl show -p ExecStart --value perfsnapd | sed -n 's/.*--config \([^ ;]*\).*/\1/p')
sed -i -e 's/^retention = .*/retention = 10m/' -e 's/^cache_max_size = .*/cache_max_size = 200M/' "$conf"
grep -E '^(frequency_hz|retention|cache_max_size|cache_dir|database) ' "$conf"
systemctl start perfsnapd || { journalctl -u perfsnapd --no-pager | tail; echo "FAIL: start"; exit 1; }
[ "$(systemctl is-active perfsnapd)" = active ] || { echo "FAIL: not active"; exit 1; }
PID=$(systemctl show -p MainPID --value perfsnapd)
db=$(sed -n 's/^database = //p' "$conf"); db=${db:-/var/lib/perfsnapd/perfsnapd.db}
cache=$(sed -n 's/^cache_dir = //p' "$conf"); cache=${cache:-/var/cache/perfsnapd}
echo "kernel $(uname -r), $(nproc) CPUs; perfsnapd pid $PID; database $db; cache $cache"
END=$(( $(date +%s) + MIN * 60 ))
status_field() { perfsnapctl status --format json | sed -n "s/^ *\"$1\": *\([0-9]*\).*/\1/p"; }
# A number even when the call fails.
status_num() { v=$(status_field "$1"); echo "${v:-0}"; }

( while [ "$(date +%s)" -lt "$END" ]; do
        for m in brd null_blk dummy veth; do
                modprobe $m || echo "$m" >> $D/modprobe.fail
                [ $m = brd ] && dd if=/dev/ram0 of=/dev/null bs=64k count=256 2>/dev/null
                for _ in 1 2 3 4 5 6 7 8 9 10; do rmmod $m 2>/dev/null && break; sleep 0.2; done
                grep -q "^$m " /proc/modules && echo "$m" >> $D/rmmod.fail
        done
        sleep 2
  done ) &
CH=$!
( while [ "$(date +%s)" -lt "$END" ]; do
        for c in "query --since 5m" "modules --since 1h" "events" "ksyms" "status" "cache list"; do
                # shellcheck disable=SC2086
                if perfsnapctl $c > /dev/null 2>> $D/client.err; then echo >> $D/calls; else echo "$c" >> $D/calls.fail; fi
        done
        sleep 1
  done ) &
CL=$!

count() { [ -f "$1" ] && wc -l < "$1" || echo 0; }
printf '%4s %9s %9s %4s %5s %11s %11s %6s %6s %6s %6s %8s %8s %8s\n' min rss_kb hwm_kb fds fdmax db_bytes cache_bytes added removd calls failed heap_kb sqlite_kb cache_kb
: > $D/table
for m in $(seq 1 "$MIN"); do
        sleep $(( END - (MIN - m) * 60 - $(date +%s) )) 2>/dev/null
        kill -0 "$PID" 2>/dev/null || { echo "FAIL: perfsnapd exited at minute $m"; journalctl -u perfsnapd --no-pager | tail; exit 1; }
        rss=$(awk '/VmRSS/ { print $2 }' /proc/$PID/status); hwm=$(awk '/VmHWM/ { print $2 }' /proc/$PID/status)
        # The client's connections and snapshot files come and go: the
        # lowest of 10 counts 0.3 s apart is the floor a leak would raise,
        # the highest shows the traffic.
        fds=999; fdmax=0
        for _ in 1 2 3 4 5 6 7 8 9 10; do
                f=$(ls /proc/$PID/fd | wc -l)
                [ "$f" -lt "$fds" ] && fds=$f
                [ "$f" -gt "$fdmax" ] && fdmax=$f
                sleep 0.3
        done
        dbb=$(( $(stat -c %s "$db") + $( [ -f "$db-wal" ] && stat -c %s "$db-wal" || echo 0) ))
        cb=$(du -sb "$cache" | cut -f1)
        caches=$(( $(status_num ingest_cache_bytes) + $(status_num store_cache_bytes) + $(status_num tasks_bytes) ))
        printf '%4d %9d %9d %4d %5d %11d %11d %6s %6s %6d %6d %8d %8d %8d\n' "$m" "$rss" "$hwm" "$fds" "$fdmax" "$dbb" "$cb" \
                "$(status_field modules_added)" "$(status_field modules_removed)" "$(count $D/calls)" "$(count $D/calls.fail)" \
                $(( $(status_num heap_bytes) / 1024 )) $(( $(status_num sqlite_memory_bytes) / 1024 )) $(( caches / 1024 )) | tee -a $D/table
done
# The loops end by themselves at END; a step still running then (a slow
# rmmod or query) is not waited for.
sleep 20
kill $CH $CL 2> /dev/null
echo "modprobe failures: $(count $D/modprobe.fail), rmmod failures: $(count $D/rmmod.fail)"
[ -s $D/calls.fail ] && { sort $D/calls.fail | uniq -c; head -5 $D/client.err; }
perfsnapctl cache list | tail -3
# The verdict over the last third against the middle third.
python3 - $D/table "$(count $D/calls.fail)" <<'PY'
import sys
rows = [list(map(int, l.split()[:7] + l.split()[11:14])) for l in open(sys.argv[1])]
n = len(rows) // 3
mid, last = rows[n:2 * n], rows[2 * n:]
def check(cond, what):
    print(("PASS: " if cond else "FAIL: ") + what)
rb, rl = max(r[1] for r in mid), max(r[1] for r in last)
check(rl <= rb * 1.10, "RSS: max %d kB in the last third vs %d kB in the middle third (%+.1f %%)" % (rl, rb, 100.0 * (rl - rb) / rb))
for i, what in ((7, "malloc heap in use"), (8, "sqlite memory"), (9, "bounded caches")):
    a, b = max(r[i] for r in mid), max(r[i] for r in last)
    print("INFO: %s: max %d kB in the last third vs %d kB in the middle third (%+.1f %%)" % (what, b, a, 100.0 * (b - a) / max(a, 1)))
fm, fl = [r[3] for r in mid], [r[3] for r in last]
check(max(fl) <= max(fm) + 1, "fds: floor %d..%d in the last third vs %d..%d in the middle third (most seen %d)" % (min(fl), max(fl), min(fm), max(fm), max(r[4] for r in rows)))
dbm = sum(r[5] for r in mid) / len(mid)
check(all(0.8 * dbm <= r[5] <= 1.2 * dbm for r in last), "database: %d..%d bytes in the last third vs mean %d in the middle third" % (min(r[5] for r in last), max(r[5] for r in last), dbm))
check(max(r[6] for r in last) <= 200 * 1024 * 1024 * 1.05, "snapshot cache: at most %d bytes in the last third (cache_max_size 200M)" % max(r[6] for r in last))
check(sys.argv[2] == "0", "client calls failed: %s" % sys.argv[2])
PY
