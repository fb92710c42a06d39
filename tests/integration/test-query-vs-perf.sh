#!/bin/bash
# The main path end to end: the real daemon samples a kernel-heavy workload
# system-wide; perfsnapctl's top kernel symbols for it agree with what
# perf record + perf report attribute to the same run; json and folded
# outputs parse; a clean SIGTERM leaves every counted sample in the database.
. "$(dirname "$0")/lib.sh"
require_root
command -v perf >/dev/null || skip "needs perf (linux-perf)"
perf record -q -a -F 99 -o /dev/null -- true >/dev/null 2>&1 || skip "perf record -a does not work here"

setup_dir "frequency_hz = 999" "callchain_depth = 32"
start_daemon

# Workload: reading /dev/zero keeps the CPU in the kernel's clear-user path.
perf record -q -a -g -F 999 -o "$T/perf.data" -- \
        dd if=/dev/zero of=/dev/null bs=1M count=60000 2>"$T/dd.log" >/dev/null \
        || fail "perf record failed"
# Until everything stamped before the workload ended is committed
# (commit_interval is 1s).
T_END=$(date +%s%N)
wait_committed "$T_END"

"$PERFSNAPCTL" query --since 2m --comm dd --top 10 > "$T/table.txt" || fail "query (table) failed"
cat "$T/table.txt"
"$PERFSNAPCTL" query --since 2m --comm dd --format json > "$T/q.json" || fail "query --format json failed"
"$PERFSNAPCTL" query --since 2m --format folded > "$T/folded.txt" || fail "query --format folded failed"
perf report -i "$T/perf.data" --no-children --comm dd --sort sym --stdio -g none --percentage relative \
        2>/dev/null > "$T/perf-report.txt" || fail "perf report failed"

python3 - "$T" <<'PY' || fail "perfsnapd and perf disagree (see above)"
import json, re, sys
t = sys.argv[1]
doc = json.load(open(f"{t}/q.json"))
res = doc["result"]
rows = [r for r in res["rows"] if r["kernel"]]
ours = [r["symbol"] for r in rows]
total = res["total"]
assert total > 500, f"expected > 500 samples of dd, got {total}"
theirs = []
for line in open(f"{t}/perf-report.txt"):
    m = re.match(r"\s*([\d.]+)%\s+\[k\]\s+(\S+)", line)
    if m:
        theirs.append((float(m.group(1)), m.group(2)))
assert theirs, "perf report listed no kernel symbols for dd"
theirs.sort(key=lambda x: -x[0])
print("perfsnapd top kernel symbols:", ours[:5])
print("perf report top kernel symbols:", [s for _, s in theirs[:5]])
top_theirs = theirs[0][1]
assert top_theirs in ours[:3], f"perf's top symbol {top_theirs} not in perfsnapd's top 3 {ours[:3]}"
assert ours[0] in [s for _, s in theirs[:3]], f"perfsnapd's top symbol {ours[0]} not in perf's top 3"
# Shares of the top symbol within 10 percentage points, of the samples
# not taken where interrupts are enabled again: a timer that fires while
# they are off is taken there (8% of samples on a PVM guest), and two
# samplers' timers can lock in phase so that one of them never fires in
# such a window (seen: perf 0.0% in pvm_irq_enable, perfsnapd 8.5%; read_zero
# 83.0% and 75.9%, 83.0% and 82.9% without it).
def deferred(sym):
    return re.search(r"irq_enable|irqrestore|irq_restore", sym) is not None
ours_deferred = 100.0 * sum(r["samples"] for r in rows if deferred(r["symbol"])) / total
theirs_deferred = sum(p for p, s in theirs if deferred(s))
ours_share = 100.0 * rows[0]["samples"] / total * 100.0 / (100.0 - ours_deferred)
theirs_share = dict((s, p) for p, s in theirs).get(ours[0], 0.0) * 100.0 / (100.0 - theirs_deferred)
print(f"interrupts enabled again: perfsnapd {ours_deferred:.1f}%, perf {theirs_deferred:.1f}%")
print(f"share of {ours[0]} of the rest: perfsnapd {ours_share:.1f}%, perf {theirs_share:.1f}%")
assert abs(ours_share - theirs_share) < 10.0, "top symbol shares differ by 10 points or more"
n = 0
for line in open(f"{t}/folded.txt"):
    assert re.match(r"^[^;\n]+(;[^;\n]+)* \d+$", line.rstrip("\n")), f"bad folded line: {line!r}"
    n += 1
assert n > 0, "folded output is empty"
print(f"folded: {n} lines")
PY
pass "top kernel symbols agree with perf report; json and folded parse"

grep -q "Samples:" "$T/table.txt" || fail "table header missing"
grep -q "\[kernel.kallsyms\]" "$T/table.txt" || fail "no [kernel.kallsyms] row in the table"

stop_daemon
[ "$DRC" = 0 ] || fail "perfsnapd exited with $DRC after SIGTERM"
stored=$(sed -n 's/.*Stopped: \([0-9]*\) samples stored.*/\1/p' "$T/daemon.log")
[ -n "$stored" ] || fail "no 'Stopped:' line in the daemon log"
indb=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select coalesce(sum(n_samples), 0) from sample_blocks where level = 0').fetchone()[0])" "$DB")
echo "daemon stored $stored samples, database holds $indb"
[ "$stored" = "$indb" ] || fail "after SIGTERM the database holds $indb samples, the daemon counted $stored"
pass "SIGTERM flushed every sample ($indb)"
