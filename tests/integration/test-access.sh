#!/bin/bash
# Who may query: root and members of the configured group. A caller
# outside it is refused, by the socket's mode (0660 root:GROUP) and, when
# the mode is opened up, by the daemon's own SO_PEERCRED check.
. "$(dirname "$0")/lib.sh"
require_root
use_group

setup_dir "group = $GROUP"
chmod 755 "$T"
start_daemon

mode=$(stat -c '%a %U:%G' "$SOCK")
[ "$mode" = "660 root:$GROUP" ] || fail "socket is $mode, expected 660 root:$GROUP"
pass "socket is $mode"

as_member() { setpriv --reuid=65534 --regid=65534 --groups="$GID" -- "$@"; }
as_other() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

as_member "$PERFSNAPCTL" status > "$T/member.txt" 2>&1 || { cat "$T/member.txt"; fail "a member of $GROUP could not query"; }
pass "a member of $GROUP may query"

# Exports are queries: a member may make them. The kcore snapshots are
# root's: a member's perf.data is the plain file, and says why.
mkdir -m 1777 "$T/out"
# Samples taken once the start-up snapshot is done carry its link as they
# are stored (snapshot_linked_samples counts only those linked later).
wait_field snapshots_created -ge 1
busy_start 1
T_NOW=$(now_ns)
wait_committed "$T_NOW"
busy_stop
as_member "$PERFSNAPCTL" export --since 1m -o "$T/out/cpu.pb.gz" 2> "$T/export.err" || { cat "$T/export.err"; fail "a member could not export pprof"; }
as_member "$PERFSNAPCTL" export --since 1m -o "$T/out/cpu.perf.data" 2> "$T/export.err" || { cat "$T/export.err"; fail "a member could not export perf.data"; }
[ -f "$T/out/cpu.perf.data" ] || fail "a member's perf.data export is not a plain file"
grep -q "not readable here" "$T/export.err" || fail "the member was not told why the perf.data has no kcore: $(cat "$T/export.err")"
out=$(as_member "$PERFSNAPCTL" export --since 1m --with-kcore -o "$T/out/k.perf.data" 2>&1) && fail "--with-kcore as a member succeeded: $out"
echo "$out" | grep -q "root" || fail "--with-kcore as a member: no word of root in: $out"
pass "a member may export; its perf.data comes without the root-only kcore snapshot, and says so"

out=$(as_other "$PERFSNAPCTL" query --since 1m 2>&1); rc=$?
echo "$out"
[ $rc = 1 ] || fail "non-member: exit $rc, expected 1"
echo "$out" | grep -qi "permission denied" || fail "non-member: no 'permission denied' in: $out"
echo "$out" | grep -q "$GROUP" || fail "non-member: the message does not name group $GROUP"
pass "a non-member is refused by the socket mode"

chmod 666 "$SOCK"
out=$(as_other "$PERFSNAPCTL" query --since 1m 2>&1); rc=$?
echo "$out"
[ $rc = 1 ] || fail "non-member on an open socket: exit $rc, expected 1"
echo "$out" | grep -qi "permission denied" || fail "daemon did not refuse: $out"
echo "$out" | grep -q "$GROUP" || fail "the refusal does not name group $GROUP"
pass "a non-member is refused by the daemon (SO_PEERCRED)"
kill -0 "$DPID" || fail "daemon died"

# SIGHUP with another group: the socket changes hands with it.
chmod 660 "$SOCK"
sed -i "s/^group = .*/group = users/" "$CONF"
kill -HUP "$DPID"
wait_until "the socket to belong to group users" sh -c "[ \"\$(stat -c %G '$SOCK')\" = users ]"
setpriv --reuid=65534 --regid=65534 --groups=100 -- "$PERFSNAPCTL" status > "$T/users.txt" 2>&1 \
        || { cat "$T/users.txt"; fail "a member of users could not query after SIGHUP set group = users"; }
out=$(as_member "$PERFSNAPCTL" status 2>&1) && fail "a member of $GROUP only could still query: $out"
pass "SIGHUP to group = users: socket $(stat -c '%a %U:%G' "$SOCK"), users may query, $GROUP no longer"
