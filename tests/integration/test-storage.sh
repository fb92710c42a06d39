#!/bin/bash
# The store under stress, with real perf events: kill -9 while writing (x20),
# database_max_size held while sampling, a full disk lived through.
. "$(dirname "$0")/lib.sh"
require_root

# pages DB: bytes of the database's pages in use (what database_max_size holds).
pages() {
        python3 -c "import sqlite3,sys; c=sqlite3.connect('file:%s?mode=ro' % sys.argv[1], uri=True, timeout=5)
print((c.execute('pragma page_count').fetchone()[0] - c.execute('pragma freelist_count').fetchone()[0]) * c.execute('pragma page_size').fetchone()[0])" "$1"
}
# stored DB: samples in the database's buckets; check DB: integrity, and the
# counters status reads agree with the blocks.
stored() {
        python3 -c "import sqlite3,sys; c=sqlite3.connect('file:%s?mode=ro' % sys.argv[1], uri=True, timeout=5)
print(c.execute('select coalesce(sum(n_samples), 0) from sample_blocks where level = 0').fetchone()[0])" "$1"
}
check_db() {
        python3 - "$1" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], timeout=5)
ok = c.execute("pragma integrity_check").fetchone()[0]
blocks = c.execute("select coalesce(sum(n_samples), 0) from sample_blocks where level = 0").fetchone()[0]
meta = dict(c.execute("select key, value from sample_meta").fetchall()).get("samples", 0)
print(ok, blocks, meta)
sys.exit(0 if ok == "ok" and blocks == meta else 1)
PY
}

# ---- 1. kill -9 while writing, 20 times ----
setup_dir "frequency_hz = 999" "commit_interval = 200ms"
busy_start 2
prev=0
for i in $(seq 1 20); do
        start_daemon
        # Let it commit past what the last run left, then read what status
        # says is committed and kill it at once.
        wait_field stored_samples -gt "$prev"
        sleep 0.$(( RANDOM % 9 + 1 ))
        committed=$(status_field stored_samples)
        kill -KILL "$DPID"; wait "$DPID" 2>/dev/null; DPID=
        read -r ok have meta <<< "$(check_db "$DB")" || fail "after kill -9 #$i: integrity '$ok', buckets hold $have samples, counters say $meta"
        [ "$have" -ge "$committed" ] || fail "after kill -9 #$i: status said $committed samples were committed, the file holds $have"
        echo "kill -9 #$i: status said $committed committed, the file holds $have; integrity $ok"
        prev=$have
done
busy_stop
pass "20 kill -9 while writing: integrity ok and every committed sample there each time ($prev in the end)"

# ---- 2. database_max_size ----
# Fill past the cap first (4999 Hz, no cap), then run 60 s at 999 Hz with
# database_max_size = 2M: the pages in use must come under the cap within
# a few seconds and stay within 10% over it, the newest samples answer.
rm -f "$DB"*
sed -i '/^frequency_hz/d; /^commit_interval/d' "$CONF"
echo "frequency_hz = 4999" >> "$CONF"
echo "database_max_size = unlimited" >> "$CONF"
# Many distinct stacks fill the dictionary too: file system walks and
# short-lived processes, not only a spinning shell.
busy_start 1
for i in 1 2; do
        timeout 270 sh -c 'while :; do ls -lR /usr/share /usr/lib > /dev/null 2>&1; sort /etc/services | md5sum > /dev/null; done' &
        BUSY_PIDS="$BUSY_PIDS $!"
done
start_daemon
# 2.5 MiB: past the cap and its 10% (at about 10 bytes a sample that
# takes two minutes or more).
end=$(( $(date +%s) + 240 ))
until [ "$(pages "$DB")" -gt $((5 << 19)) ]; do
        [ "$(date +%s)" -lt "$end" ] || fail "the database did not reach 2.5 MiB in 240 s at 4999 Hz: $(pages "$DB") bytes"
        check_alive "the database to grow"
        sleep 1
done
filled=$(stored "$DB")
stop_daemon
echo "filled: $(pages "$DB") bytes in use for $filled samples"

sed -i 's/^frequency_hz = .*/frequency_hz = 999/; s/^database_max_size = .*/database_max_size = 2M/' "$CONF"
busy_stop; busy_start 2
start_daemon
cap=$((2 << 20)); over=0; max=0
end=$(( $(date +%s) + 60 ))
t_start=$(date +%s)
while [ "$(date +%s)" -lt "$end" ]; do
        check_alive "60 s under database_max_size"
        p=$(pages "$DB")
        # The first check runs at start-up, then every second.
        if [ $(( $(date +%s) - t_start )) -ge 3 ]; then
                [ "$p" -gt "$max" ] && max=$p
                [ "$p" -le $(( cap + cap / 10 )) ] || over=$((over + 1))
        fi
        sleep 1
done
t=$(now_ns)
"$PERFSNAPCTL" query --since 10s --format json > "$T/q.json" || fail "query failed"
recent=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['result']['total'])" "$T/q.json")
removed=$(status_field cap_removed_samples); newest=$(status_field cap_removed_newest_ns)
echo "60 s at 999 Hz with database_max_size = 2M: at most $max bytes in use, $over checks over 2.2 MiB; $recent samples in the last 10 s; status: cap removed $removed samples, the newest at $newest"
[ "$over" = 0 ] || fail "the database was more than 10% over database_max_size in $over of the checks (max $max bytes)"
[ "$recent" -gt 0 ] || fail "no samples in the last 10 s under the cap"
[ "$removed" -gt 0 ] || fail "status cap_removed_samples is $removed"
grep -q "younger than the retention period" "$T/daemon.log" || fail "the log does not say the cap removed samples younger than retention"
stop_daemon
busy_stop
pass "database_max_size = 2M held for 60 s at 999 Hz (max $max bytes), newest samples queryable, removal reported"

# ---- 3. a full disk ----
# The database on a 6 MiB tmpfs, filled up but for ~400 KiB by another file.
# Sampling goes on; the batches the disk refuses are held in memory and
# written once there is room again, nothing dropped. Then, with a hold of
# 64 KiB, the disk stays full past it: what was held is dropped and counted
# with the reason, and writing resumes by itself.
MNT=$T/small
mkdir -p "$MNT"
if ! mount -t tmpfs -o size=6m,mode=0755 tmpfs "$MNT"; then
        echo "SKIP (part 3): cannot mount a tmpfs here: the full disk is not tested"
        exit 0
fi
trap 'busy_stop; [ -n "${DPID:-}" ] && kill -KILL "$DPID" 2>/dev/null; wait 2>/dev/null; umount "$MNT" 2>/dev/null; rm -rf "$T"' EXIT
sed -i "s|^database = .*|database = $MNT/perfsnapd.db|; s/^database_max_size = .*/database_max_size = unlimited/" "$CONF"
DB=$MNT/perfsnapd.db
fill() {
        local avail
        avail=$(df -B1 --output=avail "$MNT" | tail -1)
        dd if=/dev/zero of="$MNT/filler" bs=4096 count=$(( (avail - 400 * 1024) / 4096 )) 2>/dev/null || true
}
start_daemon
fill
busy_start 2
WAIT_TIMEOUT=120 wait_field held_samples -gt 0
reason=$(status_field held_reason); since=$(status_field held_since_ns)
[ "$reason" = "No space left on device" ] || fail "held_reason is '$reason'"
[ "$since" -gt 0 ] || fail "held_since_ns is '$since'"
sleep 3
check_alive "samples while the disk is full"
h1=$(status_field held_samples); hb=$(status_field held_bytes)
d1=$(status_field dropped_samples)
echo "disk full: held_samples $h1 ($hb bytes kept, $reason), dropped_samples $d1"
[ "$d1" = 0 ] || fail "$d1 samples dropped while the hold has room ($hb bytes held)"
rm -f "$MNT/filler"
WAIT_TIMEOUT=30 wait_field held_samples -eq 0
d2=$(status_field dropped_samples)
[ "$d2" = 0 ] || fail "$d2 samples dropped on the way out of the full disk"
grep -q "samples held in memory are written" "$T/daemon.log" || fail "the log does not say the held samples were written"
busy_stop
pass "full disk: $h1 samples held ($hb bytes), written when there was room, 0 dropped"

sed -i "s/^hold_max_size = .*/hold_max_size = 64K/" "$CONF"
grep -q "^hold_max_size = 64K" "$CONF" || echo "hold_max_size = 64K" >> "$CONF"
kill -HUP "$DPID"
wait_until "the daemon reloads its configuration" grep -q "Reloaded" "$T/daemon.log"
fill
busy_start 2
WAIT_TIMEOUT=120 wait_field dropped_samples -gt 0
reason=$(status_field dropped_reason); since=$(status_field dropped_since_ns)
echo "disk full past the hold: dropped_samples $FIELD ($reason) since $since"
[ "$reason" = "No space left on device" ] || fail "dropped_reason is '$reason'"
[ "$since" -gt 0 ] || fail "dropped_since_ns is '$since'"
d3=$FIELD
sleep 2
check_alive "samples while the disk is full past the hold"
rm -f "$MNT/filler"
s0=$(status_field stored_samples)
WAIT_TIMEOUT=30 wait_field stored_samples -gt "$((s0 + 1000))"
d4=$(status_field dropped_samples)
sleep 3
d5=$(status_field dropped_samples)
[ "$d4" = "$d5" ] || fail "samples are still dropped after the disk has room again: $d4 then $d5"
busy_stop
taken=$(status_field samples)
stop_daemon
[ "$DRC" = 0 ] || fail "perfsnapd exited with $DRC"
line=$(grep "Stopped:" "$T/daemon.log")
echo "$line"
n_stored=$(echo "$line" | sed -n 's/.*Stopped: \([0-9]*\) samples stored.*/\1/p')
n_dropped=$(echo "$line" | sed -n 's/.* \([0-9]*\) not stored.*/\1/p')
read -r ok have meta <<< "$(check_db "$DB")" || fail "after the full disk: integrity '$ok', buckets $have, counters $meta"
[ "$have" = "$n_stored" ] || fail "the log says $n_stored samples stored, the file holds $have"
[ "$n_dropped" = "$d5" ] || fail "the log says $n_dropped not stored, status said $d5"
[ "$n_dropped" -ge "$d3" ] || fail "fewer drops at the end ($n_dropped) than during the full disk ($d3)"
[ "$((n_stored + n_dropped))" -ge "$taken" ] || fail "$n_stored stored + $n_dropped dropped < $taken taken"
pass "full disk past hold_max_size = 64K: $n_dropped samples counted as not stored ($reason), writing resumed by itself, $n_stored stored = what the file holds, integrity ok"
