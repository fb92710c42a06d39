#!/bin/bash
# The daemon's files are private whatever the umask it is started with
# (the database holds kernel addresses, the cache copies of kernel
# memory); it refuses a state directory others can write and a database
# path that is a symbolic link; its log at the default level prints no
# kernel address.
. "$(dirname "$0")/lib.sh"
require_root

setup_dir
# Later lines win over setup_dir's: directories the daemon has to make.
{
        echo "database = $T/state/perfsnapd.db"
        echo "socket = $T/run/perfsnapd.sock"
        echo "cache_dir = $T/cache"
} >> "$CONF"
SOCK=$T/run/perfsnapd.sock
export PERFSNAPD_SOCKET=$SOCK
DB=$T/state/perfsnapd.db

umask 000
start_daemon
umask 022
busy_start 1
WAIT_TIMEOUT=30 wait_field stored_samples -gt 0
busy_stop

mode() { stat -c '%a' "$1"; }
check_mode() {
        local m
        m=$(mode "$1")
        [ "$m" = "$2" ] || fail "$1 is mode $m, expected $2 (started with umask 000)"
}
check_mode "$T/state" 750
check_mode "$DB" 600
check_mode "$DB-wal" 600
check_mode "$DB-shm" 600
check_mode "$T/run" 755
check_mode "$SOCK" 660
[ -d "$T/cache" ] || fail "no cache directory was made"
loose=$(find "$T/cache" \( -type d ! -perm 700 \) -o \( -type f -perm /077 \) | head -5)
[ -z "$loose" ] || fail "cache entries others may read: $loose ($(stat -c '%a %n' $loose | paste -sd' '))"
pass "state 750, database, WAL and shm 600, socket directory 755, socket 660, cache private ($(find "$T/cache" -type f | wc -l) files)"

if grep -Eq '0xffffffff[0-9a-f]{8}' "$T/daemon.log"; then
        grep -E '0xffffffff[0-9a-f]{8}' "$T/daemon.log" | head -3
        fail "the log prints kernel addresses at level info"
fi
pass "no kernel address in the log at level info"
stop_daemon
[ "$DRC" = 0 ] || fail "perfsnapd exited with $DRC"

# A state directory every user may write: refused, with the reason.
chmod 777 "$T/state"
"$PERFSNAPD" --config "$CONF" > "$T/refused.log" 2>&1 && fail "perfsnapd started on a directory every user may write"
cat "$T/refused.log"
grep -q "every user may write" "$T/refused.log" || fail "the refusal does not say why"
chmod 750 "$T/state"
pass "a state directory every user may write is refused"

# A database that is a symbolic link: refused.
mv "$DB" "$T/state/real.db"
ln -s "$T/state/real.db" "$DB"
"$PERFSNAPD" --config "$CONF" > "$T/symlink.log" 2>&1 && fail "perfsnapd opened a database through a symbolic link"
cat "$T/symlink.log"
grep -q "Refusing $DB: it is a symbolic link" "$T/symlink.log" || fail "no clear error for the symbolic link"
[ -L "$DB" ] || fail "the link was replaced"
pass "a database path that is a symbolic link is refused"
rm "$DB"
mv "$T/state/real.db" "$DB"

# A snapshot cache somebody else may change: refused, each with its reason.
refuse_cache() {
        local what=$1 reason=$2
        "$PERFSNAPD" --config "$CONF" > "$T/cache.log" 2>&1 && fail "perfsnapd used a cache that $what"
        grep -q "Refusing the snapshot cache $T/cache: $reason" "$T/cache.log" || { cat "$T/cache.log"; fail "no clear refusal of a cache that $what"; }
        pass "a snapshot cache that $what is refused ($reason)"
}
chown 65534 "$T/cache"
refuse_cache "belongs to another user" "it belongs to another user"
chown 0 "$T/cache"
chmod 777 "$T/cache"
refuse_cache "every user may write" "every user may write to it"
chmod 700 "$T/cache"
mv "$T/cache" "$T/cache.real"
ln -s "$T/cache.real" "$T/cache"
refuse_cache "is a symbolic link" "it is a symbolic link"
rm "$T/cache"
mv "$T/cache.real" "$T/cache"
start_daemon
stop_daemon
[ "$DRC" = 0 ] || fail "perfsnapd exited with $DRC once the cache was root's and private again"
pass "and it starts again once the cache is root's and private"
