#!/bin/bash
# The reports of perfsnapctl over real samples: diff between two windows
# (dd reading /dev/zero in the first, named-funcs in the second), the call
# trees of --callers and --callees, the --symbol and --module filters,
# --sort and --offsets.
. "$(dirname "$0")/lib.sh"
require_root

setup_dir "frequency_hz = 999" "callchain_depth = 64"
start_daemon

cp "$NAMED_FUNCS" "$T/named-funcs"
A0=$(date +%s)
timeout 3 dd if=/dev/zero of=/dev/null bs=64k 2>/dev/null || true
A1=$(( $(date +%s) + 1 ))
sleep $(( A1 - $(date +%s) ))
"$T/named-funcs" 3 > /dev/null & NPID=$!
wait "$NPID" || fail "named-funcs failed"
B1=$(( $(date +%s) + 1 ))
wait_committed "$(( B1 * 1000000000 - 500000000 ))"
sleep 1

# diff: the second window against the first.
"$PERFSNAPCTL" diff --base-since "@$A0" --base-until "@$A1" --since "@$A1" --until "@$B1" --top 0 --format json \
        > "$T/diff.json" || fail "diff failed"
"$PERFSNAPCTL" diff --base-since "@$A0" --base-until "@$A1" --since "@$A1" --until "@$B1" --top 5 | tee "$T/diff.txt"
python3 - "$T" <<'PY' || fail "diff is wrong (above)"
import json, sys
d = json.load(open(sys.argv[1] + "/diff.json"))
rows = {r["symbol"]: r for r in d["rows"]}
assert d["base_total"] > 500 and d["total"] > 500, (d["base_total"], d["total"])
g = rows.get("named_leaf_gamma")
# dd's reads of /dev/zero end in read_zero, or in the kernel's clearing of
# the user buffer where the CPU lacks FSRS (rep_stos_alternative on 6.x;
# clear_user_* before): the one of those with the most base samples.
zero = [rows[n] for n in ("read_zero", "rep_stos_alternative", "clear_user_rep_good", "clear_user_erms", "clear_user",
                          "__clear_user") if n in rows]
z = max(zero, key=lambda r: r["base_samples"]) if zero else None
assert g and g["base_samples"] == 0 and g["samples"] > 0 and g["change"] > 15, g
assert z and z["base_samples"] > 0 and z["change"] < -15, z
changes = [abs(r["change"]) for r in d["rows"]]
assert changes == sorted(changes, reverse=True), "not sorted by the size of the change"
# The shares are those of each window's samples.
assert abs(g["change"] - (100.0 * g["samples"] / d["total"] - 100.0 * g["base_samples"] / d["base_total"])) < 1e-6
print("diff:", "named_leaf_gamma", round(g["change"], 2), z["symbol"], round(z["change"], 2))
PY
grep -q "named_leaf_gamma" "$T/diff.txt" || fail "the table does not show named_leaf_gamma"

W=(--since "@$A0" --until "@$B1")
"$PERFSNAPCTL" query "${W[@]}" --callers named_leaf_gamma > "$T/callers.txt" || fail "--callers failed"
"$PERFSNAPCTL" query "${W[@]}" --callees named_outer_alpha > "$T/callees.txt" || fail "--callees failed"
"$PERFSNAPCTL" query "${W[@]}" --symbol named_middle_beta --top 5 > "$T/symbol.txt" || fail "--symbol failed"
"$PERFSNAPCTL" query "${W[@]}" --symbol named_middle_beta --format folded > "$T/symbol.folded" || fail "--symbol folded failed"
"$PERFSNAPCTL" query "${W[@]}" --module named-funcs --format json > "$T/module.json" || fail "--module failed"
"$PERFSNAPCTL" query "${W[@]}" --dso named-funcs --format json > "$T/dso.json" || fail "--dso failed"
"$PERFSNAPCTL" query "${W[@]}" --callers no_such_function_here > "$T/none.txt" || fail "--callers of nothing failed"
"$PERFSNAPCTL" query "${W[@]}" --sort comm,dso --top 0 > "$T/sort1.txt" || fail "--sort comm,dso failed"
"$PERFSNAPCTL" query "${W[@]}" --sort pid,sym --comm named-funcs --top 3 > "$T/sort2.txt" || fail "--sort pid,sym failed"
"$PERFSNAPCTL" query "${W[@]}" --comm named-funcs --offsets --top 0 --format json > "$T/offsets.json" || fail "--offsets failed"
"$PERFSNAPCTL" query "${W[@]}" --comm named-funcs --top 0 --format json > "$T/plain.json" || fail "query failed"
"$PERFSNAPCTL" query "${W[@]}" --sort comm,nonsense 2> "$T/sort-bad.txt" && fail "--sort with a bad key succeeded"
grep -q "invalid --sort key 'nonsense'" "$T/sort-bad.txt" || fail "no clear error for a bad --sort key: $(cat "$T/sort-bad.txt")"
cat "$T/callers.txt" "$T/callees.txt" "$T/symbol.txt" "$T/sort2.txt"
python3 - "$T" <<'PY' || fail "the reports are wrong (above)"
import json, re, sys
t = sys.argv[1]
def tree(name):
    out = []
    for line in open(f"{t}/{name}"):
        m = re.match(r"\s*([\d.]+)%\s+(\d+)  ( *)(\S+)$", line.rstrip("\n"))
        if m:
            out.append((len(m.group(3)) // 2, m.group(4), int(m.group(2))))
    return out
c = tree("callers.txt")
names = [n for _, n, _ in c]
assert names[:5] == ["named_leaf_gamma", "named_middle_beta", "named_outer_alpha", "main", names[4]], names
assert "named-funcs" in names, f"the command is not the outermost caller: {names}"
assert [d for d, _, _ in c[:4]] == [0, 1, 2, 3], c[:4]
assert c[0][2] > 300, c[0]
e = tree("callees.txt")
names = [n for _, n, _ in e]
assert names[:3] == ["named_outer_alpha", "named_middle_beta", "named_leaf_gamma"], names
assert e[1][2] <= e[0][2] and e[2][2] <= e[1][2], e
rows = [l.split() for l in open(f"{t}/symbol.txt") if re.match(r"\s*[\d.]+%", l)]
assert rows and all(r[2] == "named-funcs" for r in rows), rows
assert rows[0][-1] == "named_leaf_gamma", rows[0]
for line in open(f"{t}/symbol.folded"):
    # Through it: a frame of the stack, its leaf too (a sample in its own code).
    assert "named_middle_beta" in line.rsplit(" ", 1)[0].split(";")[1:], line
m, d = json.load(open(f"{t}/module.json"))["result"], json.load(open(f"{t}/dso.json"))["result"]
assert m["rows"] == d["rows"] and m["rows"], "--module is not --dso"
assert "no stack in this time range goes through no_such_function_here" in open(f"{t}/none.txt").read()
print("callers:", [n for _, n, _ in c[:4]], "callees:", names[:3], "symbol rows:", len(rows))
PY
python3 - "$T" "$NPID" <<'PY' || fail "--sort or --offsets is wrong (above)"
import json, re, sys
t, npid = sys.argv[1], sys.argv[2]
def table(name):
    return [l.split() for l in open(f"{t}/{name}") if re.match(r"\s*[\d.]+%", l)]
total = int(re.search(r"# Samples: (\d+)", open(f"{t}/sort1.txt").read()).group(1))
rows = table("sort1.txt")
assert sum(int(r[1]) for r in rows) == total, f"--sort comm,dso rows add up to {sum(int(r[1]) for r in rows)}, not {total}"
nf = [r for r in rows if r[2] == "named-funcs" and r[3].endswith("/named-funcs")]
assert nf and int(nf[0][1]) > 300, nf
rows = table("sort2.txt")
assert rows[0][2] == npid and rows[0][-1] == "named_leaf_gamma", (rows, npid)
off = json.load(open(f"{t}/offsets.json"))["result"]["rows"]
plain = json.load(open(f"{t}/plain.json"))["result"]["rows"]
gamma = [r for r in off if r["symbol"].startswith("named_leaf_gamma+0x")]
assert gamma and all(re.fullmatch(r"named_leaf_gamma\+0x[0-9a-f]+", r["symbol"]) for r in gamma), gamma[:3]
want = sum(r["samples"] for r in plain if r["symbol"] == "named_leaf_gamma")
assert sum(r["samples"] for r in gamma) == want, (sum(r["samples"] for r in gamma), want)
print("sort: named-funcs", nf[0][1], "of", total, "; offsets:", len(gamma), "rows of named_leaf_gamma,", want, "samples")
PY
stop_daemon
pass "diff, --callers, --callees, --symbol, --module, --sort and --offsets"
