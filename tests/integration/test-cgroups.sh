#!/bin/bash
# Samples attributed to cgroups and systemd units (PERF_SAMPLE_CGROUP): a
# busy process moved into a test cgroup (cgroup v2 mkdir + cgroup.procs)
# under a slice, one that moves itself into a cgroup with spaces and
# quotes in its name, and one left outside; the cgroups are removed before
# the queries, which still name them.
. "$(dirname "$0")/lib.sh"
require_root

# The cgroup v2 mount: the field after "-" in mountinfo is the type.
MNT=$(awk '{ for (i = 1; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") print $5; break } }' /proc/self/mountinfo | head -1)
[ -n "$MNT" ] || skip "no cgroup v2 hierarchy is mounted"
TOP="$MNT/psdtest-$$.slice"
CG="$TOP/burn-$$.service"
ODDNAME="we ird\"'x-$$.scope"
ODD="$TOP/$ODDNAME"
mkdir "$TOP" "$CG" "$ODD" 2>/dev/null || skip "cannot make cgroups under $MNT"

setup_dir "frequency_hz = 999"
cleanup_cgroups() {
        for d in "$ODD" "$CG" "$TOP"; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
        cleanup
}
trap cleanup_cgroups EXIT
start_daemon
SRC=$(status_field cgroup_source)
[ "$SRC" = perf ] || skip "the kernel gives no PERF_SAMPLE_CGROUP (cgroup_source '$SRC'): the VM tier covers /proc"

usage_us() { awk '$1 == "usage_usec" { print $2 }' "$1/cpu.stat"; }
T0=$(date +%s)
sh -c 'while :; do :; done' & B=$!
echo "$B" > "$CG/cgroup.procs" || fail "cannot move $B into $CG"
sh -c 'while :; do :; done' & O=$!
ODD="$ODD" sh -c 'echo $$ > "$ODD/cgroup.procs" && exec sh -c "while :; do :; done"' & Q=$!
# The burners run 3 s, and on until each has CPU time enough to tell
# (0.5, 0.5 and 0.15 s; at most 60 s): the machine may be busy with
# other work (CI runs tests side by side).
for i in $(seq 600); do
        O_TICKS=$(awk '{ print $14 + $15 }' "/proc/$O/stat")
        [ "$i" -gt 30 ] && [ "$(usage_us "$CG")" -ge 500000 ] && [ "$(usage_us "$ODD")" -ge 150000 ] &&
                [ $(( O_TICKS * 1000 / $(getconf CLK_TCK) )) -ge 500 ] && break
        sleep 0.1
done
# What the burners ran, for the samples they should have.
O_TICKS=$(awk '{ print $14 + $15 }' "/proc/$O/stat")
kill "$B" "$O" "$Q"
wait "$B" "$O" "$Q" 2>/dev/null
B_EXP=$(( $(usage_us "$CG") * 999 / 1000000 ))
O_EXP=$(( O_TICKS * 999 / $(getconf CLK_TCK) ))
ODD_EXP=$(( $(usage_us "$ODD") * 999 / 1000000 ))
T1=$(( $(date +%s) + 1 ))
rmdir "$ODD" "$CG" "$TOP" || fail "cannot remove the test cgroups"
wait_committed "$(( T1 * 1000000000 - 500000000 ))"
sleep 1
W=(--since "@$T0" --until "@$T1")

q() { "$PERFSNAPCTL" query "${W[@]}" "$@"; }
total() { q "$@" --format json | python3 -c 'import json, sys; print(json.load(sys.stdin)["result"]["total"])'; }
B_ALL=$(total --pid "$B")
O_ALL=$(total --pid "$O")
B_CG=$(total --pid "$B" --cgroup "/psdtest-$$.slice/burn-$$.service")
B_UNIT=$(total --pid "$B" --unit "burn-$$.service")
O_TOP=$(total --pid "$O" --cgroup "psdtest-$$.slice/")
SLICE=$(total --unit "psdtest-$$.slice")
ODD_N=$(total --cgroup "/psdtest-$$.slice/$ODDNAME")
GLOB=$(total --unit "psdtest-$$*")
NONE=$(total --container deadbeef)
echo "burner $B: $B_ALL samples, $B_CG in its cgroup, $B_UNIT in its unit; outside $O: $O_ALL, $O_TOP in the slice;" \
     "slice $SLICE, odd scope $ODD_N, glob $GLOB, container deadbeef $NONE;" \
     "at 999 Hz their CPU time gives $B_EXP, $O_EXP, $ODD_EXP"
[ "$B_EXP" -ge 300 ] && [ "$O_EXP" -ge 300 ] && [ "$ODD_EXP" -ge 100 ] ||
        fail "the burners ran too little to tell: $B_EXP, $O_EXP, $ODD_EXP samples' worth of CPU"
[ "$B_ALL" -ge $(( B_EXP / 2 )) ] && [ "$O_ALL" -ge $(( O_EXP / 2 )) ] ||
        fail "too few samples of the burners: $B_ALL, $O_ALL for $B_EXP, $O_EXP samples' worth of CPU"
# Samples before the move are the parent cgroup's: a few ms.
[ "$B_CG" -ge $(( B_ALL * 95 / 100 )) ] || fail "$B_CG of the burner's $B_ALL samples are in its cgroup"
[ "$B_UNIT" -eq "$B_CG" ] || fail "--unit gives $B_UNIT samples of the burner, --cgroup $B_CG"
[ "$O_TOP" -eq 0 ] || fail "$O_TOP samples of the process outside are in the test slice"
[ "$ODD_N" -ge $(( ODD_EXP / 2 )) ] ||
        fail "the cgroup with spaces and quotes has $ODD_N samples for $ODD_EXP samples' worth of CPU"
[ "$SLICE" -eq "$GLOB" ] && [ "$SLICE" -ge $(( B_CG + ODD_N )) ] ||
        fail "the slice has $SLICE samples, the glob $GLOB, its cgroups $B_CG + $ODD_N"
[ "$NONE" -eq 0 ] || fail "$NONE samples in no container matched --container deadbeef"

# The table of a unit filter has a Unit column; --sort unit sorts by it;
# folded stacks start with the unit.
q --unit "burn-$$.service" > "$T/unit.txt" || fail "query --unit failed"
q --sort unit,pid --top 0 > "$T/sort.txt" || fail "query --sort unit,pid failed"
q --unit "psdtest-$$.slice" --format folded > "$T/unit.folded" || fail "query --unit --format folded failed"
head -5 "$T/unit.txt"
grep -E "^# Overhead +Samples +Unit +Command +Module +Symbol" "$T/unit.txt" > /dev/null || fail "no Unit column with --unit"
grep -E "^ +[0-9.]+% +[0-9]+ +burn-$$\.service +sh " "$T/unit.txt" > /dev/null || fail "the table does not name burn-$$.service"
grep -E "^ +[0-9.]+% +$B_CG +burn-$$\.service +$B\$" "$T/sort.txt" > /dev/null ||
        { grep "burn-$$\|$B\$" "$T/sort.txt"; fail "--sort unit,pid has no row of burn-$$.service, pid $B with $B_CG samples"; }
grep -F "we ird\"'x-$$.scope" "$T/sort.txt" > /dev/null || fail "--sort unit does not show the scope with an odd name"
N_FOLDED=$(awk -v u="burn-$$.service;sh;" 'index($0, u) == 1 { n += $NF } END { print n + 0 }' "$T/unit.folded")
[ "$N_FOLDED" -eq "$B_CG" ] || fail "folded stacks under burn-$$.service;sh add up to $N_FOLDED, not $B_CG"
q --unit "burn-$$.service" --top 0 --format json > "$T/unit.json" || fail "query --unit --format json failed"
python3 - "$T/unit.json" "/psdtest-$$.slice/burn-$$.service" "$B_CG" <<'PY' || fail "json rows of --unit are wrong (above)"
import json, sys
r = json.load(open(sys.argv[1]))["result"]
assert r["rows"] and all(row["cgroup"] == sys.argv[2] for row in r["rows"]), [row.get("cgroup") for row in r["rows"]][:5]
assert sum(row["samples"] for row in r["rows"]) == r["total"] == int(sys.argv[3]), (r["total"], sys.argv[3])
PY
KNOWN=$(status_field cgroups_known)
[ "$KNOWN" -gt 0 ] || fail "status cgroups_known is '$KNOWN'"
pass "burn-$$.service: $B_CG samples by --cgroup, --unit, --sort unit and folded; the removed cgroups still named"

# units: the CPU time of each unit over the window.
"$PERFSNAPCTL" units "${W[@]}" --top 0 --format json > "$T/units.json" || fail "units failed"
"$PERFSNAPCTL" units "${W[@]}" --top 5 | tee "$T/units.txt" || fail "units (table) failed"
python3 - "$T/units.json" "burn-$$.service" "$B_CG" "$ODDNAME" "$ODD_N" "$B_EXP" <<'PY' || fail "units is wrong (above)"
import json, sys
d = json.load(open(sys.argv[1]))
units = {u["unit"]: u for u in d["units"]}
burn, odd = units.get(sys.argv[2]), units.get(sys.argv[4])
assert burn and burn["samples"] == int(sys.argv[3]), (burn, sys.argv[3])
assert odd and odd["samples"] == int(sys.argv[5]), (odd, sys.argv[5])
assert 0 <= burn["kernel_samples"] <= burn["samples"] and burn["top_samples"] <= burn["samples"], burn
cpu_s = int(sys.argv[6]) / 999         # the CPU time its cgroup used
assert 0.5 * cpu_s < burn["cpus"] * (d["until_ns"] - d["since_ns"]) / 1e9 < 1.5 * cpu_s, (burn, cpu_s)
assert sum(u["samples"] for u in d["units"]) + d["beyond_cgroups"] == d["total"], d["total"]
s = [u["samples"] for u in d["units"]]
assert s == sorted(s, reverse=True)
print("units:", sys.argv[2], burn["samples"], "samples,", round(burn["cpus"], 2), "CPUs, top", burn["top_symbol"])
PY
grep -E "burn-$$\.service +\[\.\] " "$T/units.txt" > /dev/null || fail "the units table does not show burn-$$.service"

# perf.data exports carry the cgroups: perf report --sort cgroup names
# the burner's, with its samples.
if command -v perf > /dev/null; then
        "$PERFSNAPCTL" export "${W[@]}" --no-kcore -o "$T/cg.perf.data" 2> "$T/export.err" || { cat "$T/export.err"; fail "export failed"; }
        perf report -i "$T/cg.perf.data" --no-children --sort cgroup -n --stdio -g none > "$T/cg-report.txt" 2> "$T/cg-report.err" ||
                { cat "$T/cg-report.err"; fail "perf report --sort cgroup failed"; }
        grep -v "^#" "$T/cg-report.txt" | grep . | head -5
        N_PERF=$(awk -v p="/psdtest-$$.slice/burn-$$.service" '$3 == p { print $2 }' "$T/cg-report.txt")
        [ "${N_PERF:-0}" -eq "$B_CG" ] || fail "perf report --sort cgroup: ${N_PERF:-no} samples of burn-$$.service, query says $B_CG"
        grep -qi "warning\|error" "$T/cg-report.err" && { cat "$T/cg-report.err"; fail "perf warned reading the export"; }
        pass "perf report --sort cgroup of the export: $N_PERF samples in /psdtest-$$.slice/burn-$$.service"
else
        echo "perf not installed: the export's cgroups are not read back"
fi

# Bad filters are refused with a clear error.
q --container XYZ 2> "$T/bad.txt" && fail "--container XYZ succeeded"
grep -q "invalid --container 'XYZ'" "$T/bad.txt" || fail "no clear error for --container XYZ: $(cat "$T/bad.txt")"
stop_daemon
