#!/bin/bash
# A damaged database is moved aside and a new one started, never written
# into; another application's sqlite file is refused and left as it was;
# perfsnapd --check-db says which.
. "$(dirname "$0")/lib.sh"
require_root
command -v sqlite3 >/dev/null || skip "needs sqlite3"

setup_dir
start_daemon
busy_start 1
WAIT_TIMEOUT=30 wait_field stored_samples -gt 0
busy_stop
stop_daemon
[ "$DRC" = 0 ] || fail "perfsnapd exited with $DRC"
"$PERFSNAPD" --config "$CONF" --check-db > "$T/check.txt" || { cat "$T/check.txt"; fail "--check-db on an intact database"; }
grep -q ": ok$" "$T/check.txt" || fail "--check-db said: $(cat "$T/check.txt")"
pass "--check-db: $(cat "$T/check.txt")"

# Damage page 2's b-tree header (pages are 8 KiB).
printf '\377\377\377\377\377\377\377\377' | dd of="$DB" bs=1 seek=8192 conv=notrunc status=none
"$PERFSNAPD" --config "$CONF" --check-db > "$T/check.txt" && fail "--check-db passed a damaged database"
grep -q ": damaged: " "$T/check.txt" || fail "--check-db said: $(cat "$T/check.txt")"
pass "--check-db: $(cat "$T/check.txt")"
damaged_sum=$(md5sum < "$DB")

start_daemon
grep "is damaged" "$T/daemon.log" || fail "no log line about the damaged database"
moved=$(ls "$DB".damaged-* 2>/dev/null | head -1)
[ -n "$moved" ] || fail "the damaged database was not moved aside: $(ls "$T")"
[ "$(md5sum < "$moved")" = "$damaged_sum" ] || fail "the damaged file was written into after the check"
busy_start 1
WAIT_TIMEOUT=30 wait_field stored_samples -gt 0
busy_stop
"$PERFSNAPCTL" query --since 1m > "$T/q.txt" || { cat "$T/q.txt"; fail "query on the new database"; }
stop_daemon
[ "$DRC" = 0 ] || fail "perfsnapd exited with $DRC"
"$PERFSNAPD" --config "$CONF" --check-db > /dev/null || fail "the new database does not pass --check-db"
pass "a damaged database is moved to $(basename "$moved"), unchanged, and a new one answers queries"

# Another application's database: refused, left exactly as it was.
rm -f "$DB" "$DB"-wal "$DB"-shm
sqlite3 "$DB" "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes(text) VALUES ('mine');"
chmod 600 "$DB"
before=$(md5sum < "$DB")
"$PERFSNAPD" --config "$CONF" > "$T/foreign.log" 2>&1 && fail "perfsnapd started on another application's database"
cat "$T/foreign.log"
grep -q "not a perfsnapd database" "$T/foreign.log" || fail "the refusal does not say why"
[ "$(md5sum < "$DB")" = "$before" ] || fail "the other application's file was changed"
[ ! -e "$DB-wal" ] || fail "a WAL was made beside the other application's file"
"$PERFSNAPD" --config "$CONF" --check-db > "$T/check.txt" && fail "--check-db passed another application's database"
grep -q "not a perfsnapd database" "$T/check.txt" || fail "--check-db said: $(cat "$T/check.txt")"
pass "another application's sqlite file is refused and left unchanged ($(cat "$T/check.txt"))"
