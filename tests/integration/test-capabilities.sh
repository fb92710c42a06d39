#!/bin/bash
# The smallest capability set the daemon works with, as the unit's
# CapabilityBoundingSet= states it: CAP_PERFMON + CAP_SYSLOG suffice;
# without either it refuses to start and says which is missing.
. "$(dirname "$0")/lib.sh"
require_root
command -v setpriv >/dev/null || skip "needs setpriv (util-linux)"
setpriv --bounding-set=-all,+perfmon -- true 2>/dev/null || skip "setpriv does not know CAP_PERFMON here"
UNIT="$(dirname "$0")/../../systemd/perfsnapd.service.in"
grep -q '^CapabilityBoundingSet=CAP_PERFMON CAP_SYSLOG CAP_SYS_RAWIO CAP_SYS_ADMIN$' "$UNIT" || fail "the unit's capability set is not the one tested here"
# CAP_SYS_ADMIN in the unit is for Debian's perf_event_paranoid=3 (tested in
# the VM tier); at 2 and below, CAP_PERFMON + CAP_SYSLOG must be enough.
[ "$(cat /proc/sys/kernel/perf_event_paranoid)" -le 2 ] || skip "perf_event_paranoid > 2 here: CAP_SYS_ADMIN is needed (see the VM tier)"

setup_dir "group ="

run_with() {   # run_with CAPS: start with only CAPS in the bounding set, for up to 3 s
        rm -f "$DB"*
        timeout 3 setpriv --bounding-set=-all,"$1" --inh-caps=-all -- "$PERFSNAPD" --config "$CONF" > "$T/log.$1" 2>&1
        echo $?
}

rc=$(run_with +perfmon,+syslog)
[ "$rc" = 124 ] || { cat "$T/log.+perfmon,+syslog"; fail "with CAP_PERFMON+CAP_SYSLOG it exited ($rc) instead of running"; }
grep -q "Sampling" "$T/log.+perfmon,+syslog" || fail "with CAP_PERFMON+CAP_SYSLOG it did not start sampling"
n=$(sed -n 's/.*Stopped: \([0-9]*\) samples stored.*/\1/p' "$T/log.+perfmon,+syslog")
[ "${n:-0}" -gt 0 ] || fail "with CAP_PERFMON+CAP_SYSLOG it stored no samples"
pass "CAP_PERFMON + CAP_SYSLOG: samples ($n in 3 s)"

rc=$(run_with +syslog)
cat "$T/log.+syslog"
[ "$rc" = 1 ] || fail "without CAP_PERFMON: exit $rc, expected 1"
grep -q "Failed to open perf events.*CAP_PERFMON" "$T/log.+syslog" || fail "without CAP_PERFMON: the error does not say so"
pass "without CAP_PERFMON: refuses, naming it"

rc=$(run_with +perfmon)
cat "$T/log.+perfmon"
[ "$rc" = 1 ] || fail "without CAP_SYSLOG: exit $rc, expected 1"
grep -q "proc/kallsyms.*CAP_SYSLOG" "$T/log.+perfmon" || fail "without CAP_SYSLOG: the error does not say so"
pass "without CAP_SYSLOG: refuses, naming it"
