#!/bin/bash
# perfsnapctl export, read by the real tools: the daemon samples a kernel
# workload (dd reading /dev/zero: read_zero) and a user one (named-funcs:
# named_leaf_gamma under named_middle_beta), then the window is exported
# and checked by what reads the format:
#   test-export.sh pprof   go tool pprof -top, -traces, -raw (golang-go)
#   test-export.sh html    headless chromium, driving the page (#selftest)
#   test-export.sh perf    perf script and perf report (linux-perf)
#   test-export.sh svg     python's XML parser; folded against query's;
#                          speedscope's JSON against the folded stacks
# Each skips (77) when its tool is missing.
. "$(dirname "$0")/lib.sh"
FORMAT=${1:?usage: test-export.sh pprof|html|svg|perf}
require_root
case $FORMAT in
pprof) command -v go >/dev/null || skip "needs go tool pprof (golang-go)"
       export GOCACHE=${GOCACHE:-/tmp/perfsnapd-test-gocache} HOME=${HOME:-/root} ;;
html) CHROMIUM=$(command -v chromium || command -v chromium-browser) || skip "needs chromium" ;;
svg) command -v python3 >/dev/null || skip "needs python3" ;;
perf) command -v perf >/dev/null || skip "needs perf (linux-perf)" ;;
*) fail "unknown format $FORMAT" ;;
esac

setup_dir "frequency_hz = 999" "callchain_depth = 64"
start_daemon

SINCE=$(date +%s)
cp "$NAMED_FUNCS" "$T/named-funcs"
"$T/named-funcs" 3 > /dev/null & P1=$!
dd if=/dev/zero of=/dev/null bs=64k count=2000000 2>/dev/null & P2=$!
sleep 3
kill "$P2" 2>/dev/null
wait "$P1" || fail "named-funcs failed"
wait "$P2" 2>/dev/null
T_END=$(now_ns)
wait_committed "$T_END"
UNTIL=$(( T_END / 1000000000 + 1 ))
W=(--since "@$SINCE" --until "@$UNTIL")

"$PERFSNAPCTL" query "${W[@]}" --format json > "$T/q.json" || fail "query failed"
read -r TOTAL DD NF < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["result"]
by = {}
for row in r["rows"]:
    by[row["comm"]] = by.get(row["comm"], 0) + row["samples"]
print(r["total"], by.get("dd", 0), by.get("named-funcs", 0))' "$T/q.json")
echo "window: $TOTAL samples, dd $DD, named-funcs $NF"
[ "$DD" -gt 300 ] && [ "$NF" -gt 300 ] || fail "too few samples of the workload: dd $DD, named-funcs $NF"

BUILD_ID=$(readelf -n "$T/named-funcs" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')

case $FORMAT in
pprof)
        "$PERFSNAPCTL" export "${W[@]}" -o "$T/cpu.pb.gz" 2> "$T/export.err" || { cat "$T/export.err"; fail "export failed"; }
        cat "$T/export.err"
        go tool pprof -raw "$T/cpu.pb.gz" > "$T/raw.txt" 2> "$T/pprof.err" || { cat "$T/pprof.err"; fail "go tool pprof -raw failed"; }
        go tool pprof -traces "$T/cpu.pb.gz" > "$T/traces.txt" 2>> "$T/pprof.err" || fail "go tool pprof -traces failed"
        go tool pprof -top -sample_index=samples -tagfocus=comm=dd "$T/cpu.pb.gz" > "$T/top-dd.txt" 2>> "$T/pprof.err" ||
                fail "go tool pprof -top failed"
        go tool pprof -top -sample_index=samples "$T/cpu.pb.gz" > "$T/top.txt" 2>> "$T/pprof.err" || fail "go tool pprof -top failed"
        if grep -qi "warning\|error" "$T/pprof.err"; then cat "$T/pprof.err"; fail "go tool pprof warned"; fi
        head -12 "$T/top-dd.txt"
        python3 - "$T" "$TOTAL" "$DD" "$BUILD_ID" <<'PY' || fail "pprof's reading disagrees (above)"
import re, sys
t, total, dd, build_id = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
top = open(f"{t}/top.txt").read()
# "Showing nodes accounting for N, P% of TOTAL total" (sample_index=samples: a count)
m = re.search(r"of (\d+) total", top)
assert m and int(m.group(1)) == total, f"pprof's total {m and m.group(1)} != query's {total}"
top_dd = open(f"{t}/top-dd.txt").read()
m = re.search(r"accounting for (\d+), ", top_dd) or re.search(r"Showing nodes accounting for (\d+)", top_dd)
assert m, "no total in -top -tagfocus=comm=dd"
assert int(m.group(1)) <= dd and int(m.group(1)) >= dd * 0.9, f"dd's samples in pprof {m.group(1)}, query says {dd}"
rows = [l.split() for l in top_dd.splitlines() if re.match(r"\s*\d+\s+[\d.]+%", l)]
assert rows and rows[0][-1] in ("read_zero", "clear_user_rep_good", "rep_stos_alternative", "clear_user_erms", "clear_user"), \
    f"dd's top function in pprof: {rows[:3]}"
traces = open(f"{t}/traces.txt").read().split("-----------+")
gamma = [tr for tr in traces if "named_leaf_gamma" in tr]
assert gamma, "no trace with named_leaf_gamma"
tr = gamma[0]
names = [l.split()[-1] for l in tr.splitlines() if l.strip() and ":" not in l]
i = names.index("named_leaf_gamma")
assert names[i:i + 4] == ["named_leaf_gamma", "named_middle_beta", "named_outer_alpha", "main"], names
assert names[-1] == "named-funcs", f"the command is not the outermost frame: {names}"
assert re.search(r"comm:\s+named-funcs", tr) and re.search(r"pid:\s+\d+", tr) and re.search(r"cpu:\s+\d+", tr) \
    and re.search(r"context:\s+user", tr), f"labels missing in {tr}"
raw = open(f"{t}/raw.txt").read()
assert re.search(r"named-funcs " + build_id + r" \[FN\]", raw), f"no mapping of named-funcs with build-id {build_id}"
assert re.search(r"\[kernel.kallsyms\] [0-9a-f]{40} \[FN\]", raw), "no kernel mapping with a build-id"
print("pprof: total", total, "dd", m.group(1), "trace:", names[i:i + 4])
PY
        ;;
html)
        "$PERFSNAPCTL" export "${W[@]}" --title "export test" -o "$T/cpu.html" || fail "export failed"
        grep -q "https\?://" "$T/cpu.html" && fail "the page refers to the network: $(grep -o 'https\?://[^"]*' "$T/cpu.html" | head -3)"
        # The profile dir keeps chromium off the caller's; no sandbox as root.
        "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --user-data-dir="$T/chromium" \
                --window-size=1280,1000 --virtual-time-budget=10000 \
                --dump-dom "file://$T/cpu.html#selftest&search=named_leaf_gamma&click=named-funcs" \
                > "$T/dom.html" 2> "$T/chromium.err" || { tail -20 "$T/chromium.err"; fail "chromium failed"; }
        python3 - "$T" "$NF" <<'PY' || fail "the page did not behave (above)"
import html, json, re, sys
t, nf = sys.argv[1], int(sys.argv[2])
dom = open(f"{t}/dom.html").read()
m = re.search(r'<pre id="selftest-result">([^<]*)</pre>', dom)
assert m, "no self-test result in the page (script error?)"
r = json.loads(html.unescape(m.group(1)))
print(json.dumps(r)[:1500])
data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', dom, re.S).group(1))
assert r["total"] == data["in_stacks"] > 0, f"graph total {r['total']} != samples in stacks {data['in_stacks']}"
assert r["frames"] > 10 and r["kernel_frames"] > 0 and r["user_frames"] > 0, r
assert "named-funcs" in r["comms"] and "dd" in r["comms"], r["comms"]
assert r["tooltip_shown"] and r["tooltip"].startswith("named-funcs\n") and f"{r['click_value']} samples" in r["tooltip"], r["tooltip"]
assert abs(r["click_value"] - nf) <= nf * 0.1, f"named-funcs in the graph {r['click_value']}, query {nf}"
assert abs(r["zoom_width"] - r["width"]) < 1, f"zoomed frame {r['zoom_width']} px of {r['width']}"
assert r["frames_zoomed"] < r["frames"], "zooming did not hide other frames"
assert r["matches"] >= 1 and "Matched:" in r["matched_text"], (r["matches"], r["matched_text"])
pct = float(re.search(r"([\d.]+)%", r["matched_text"]).group(1))
assert 0 < pct <= 100, r["matched_text"]
assert r["frames_reset"] == r["frames"] and r["total_reset"] == r["total"], "reset did not restore the graph"
assert r["slot_timeline"] > 0 and r["total_selected"] == r["slot_stacks"] > 0, \
    f"selected slot {r['slot']}: graph {r['total_selected']}, stacks {r['slot_stacks']}, strip {r['slot_timeline']}"
assert r["slot_stacks"] <= r["slot_timeline"], r
assert sum(data["timeline"]) == data["total"], f"timeline sums to {sum(data['timeline'])}, total {data['total']}"
PY
        ;;
perf)
        "$PERFSNAPCTL" export "${W[@]}" -o "$T/cpu.perf.data" 2> "$T/export.err" || { cat "$T/export.err"; fail "export failed"; }
        cat "$T/export.err"
        # The daemon keeps snapshots here: the export is perf record
        # --kcore's directory, with the snapshot's kallsyms and modules.
        [ -d "$T/cpu.perf.data" ] && [ -s "$T/cpu.perf.data/data" ] || fail "the export is not a directory with data"
        for f in kallsyms modules; do
                snap=$(sed -n 's/.*with the kcore snapshot \(.*\))$/\1/p' "$T/export.err")
                cmp "$T/cpu.perf.data/kcore_dir/$f" "$snap/$f" || fail "kcore_dir/$f is not the snapshot's ($snap)"
        done
        "$PERFSNAPCTL" export "${W[@]}" --no-kcore -o "$T/plain.perf.data" || fail "export --no-kcore failed"
        [ -f "$T/plain.perf.data" ] || fail "export --no-kcore did not write a file"
        perf script -i "$T/plain.perf.data" -F comm > "$T/plain.txt" 2> "$T/plain.err" || { cat "$T/plain.err"; fail "perf script of the plain file failed"; }
        perf script -i "$T/cpu.perf.data" -F comm,pid,tid,cpu,time,ip,sym > "$T/script.txt" 2> "$T/script.err" ||
                { head -20 "$T/script.err"; fail "perf script failed"; }
        perf report -i "$T/cpu.perf.data" --stdio --no-children --sort comm,sym -g none > "$T/report.txt" 2> "$T/report.err" ||
                { head -20 "$T/report.err"; fail "perf report failed"; }
        perf annotate -i "$T/cpu.perf.data" --stdio -s named_leaf_gamma > "$T/annotate.txt" 2> "$T/annotate.err" ||
                { head -20 "$T/annotate.err"; fail "perf annotate failed"; }
        grep -q "named_leaf_gamma" "$T/annotate.txt" || { head -20 "$T/annotate.txt" "$T/annotate.err"; fail "perf annotate shows no named_leaf_gamma"; }
        # Instruction lines with a share of the function's samples.
        n=$(grep -cE "^ +[0-9]+\.[0-9]+ +:" "$T/annotate.txt")
        [ "$n" -gt 0 ] || { head -30 "$T/annotate.txt"; fail "perf annotate shows no samples on instructions"; }
        echo "perf annotate: $n instructions of named_leaf_gamma with samples"
        cat "$T/script.err" "$T/report.err" "$T/annotate.err"
        if grep -qi "warning\|error\|failed\|corrupt" "$T/script.err" "$T/report.err" "$T/annotate.err"; then
                fail "perf warned reading the export (above)"
        fi
        grep -E "^ +[0-9.]+%" "$T/report.txt" | head -8
        python3 - "$T" "$DD" "$NF" "$P1" <<'PY' || fail "perf reads the export wrong (above)"
import re, sys
t, dd, nf, npid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
# perf script: a sample's first line (comm pid/tid [cpu] time:), then its chain.
samples, chains, cur = {}, [], None
for line in open(f"{t}/script.txt"):
    m = re.match(r"\s*(\S.*?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):", line)
    if m:
        samples[m.group(1)] = samples.get(m.group(1), 0) + 1
        if m.group(1) == "named-funcs":
            assert (m.group(2), m.group(3)) == (npid, npid), f"named-funcs sample of pid/tid {m.group(2)}/{m.group(3)}, not {npid}" 
        cur = (m.group(1), [])
        chains.append(cur)
    elif cur and line.strip():
        cur[1].append(line.split()[1] if len(line.split()) > 1 else "?")
assert abs(samples.get("dd", 0) - dd) <= dd * 0.1, f"dd: {samples.get('dd')} samples in perf script, query {dd}"
assert abs(samples.get("named-funcs", 0) - nf) <= nf * 0.1, f"named-funcs: {samples.get('named-funcs')}, query {nf}"
gamma = [c for comm, c in chains if comm == "named-funcs" and c and c[0].startswith("named_leaf_gamma")]
assert len(gamma) > nf * 0.8, f"{len(gamma)} of {nf} named-funcs chains start in named_leaf_gamma"
c = [s.split("+")[0] for s in gamma[0]]
assert c[:4] == ["named_leaf_gamma", "named_middle_beta", "named_outer_alpha", "main"], c
zero = [c for comm, c in chains if comm == "dd" and c and c[0].split("+")[0] in ("read_zero", "clear_user_rep_good", "clear_user_erms", "rep_stos_alternative", "__clear_user")]
assert len(zero) > dd * 0.5, f"{len(zero)} of {dd} dd chains start in the kernel's /dev/zero read"
report = open(f"{t}/report.txt").read()
assert re.search(r"named-funcs\s+\[\.\]\s+named_leaf_gamma", report), "perf report has no named_leaf_gamma of named-funcs"
assert re.search(r"dd\s+\[k\]\s+read_zero", report), "perf report has no read_zero of dd"
plain = sum(1 for _ in open(f"{t}/plain.txt"))
assert plain == sum(samples.values()), f"the plain file has {plain} samples, the directory {sum(samples.values())}"
print(f"perf script: {sum(samples.values())} samples, dd {samples.get('dd')}, named-funcs {samples.get('named-funcs')}")
PY
        ;;
svg)
        "$PERFSNAPCTL" export "${W[@]}" -o "$T/cpu.svg" || fail "export failed"
        "$PERFSNAPCTL" export "${W[@]}" -o "$T/export.folded" || fail "export folded failed"
        "$PERFSNAPCTL" query "${W[@]}" --format folded > "$T/query.folded" || fail "query folded failed"
        cmp "$T/export.folded" "$T/query.folded" || fail "export --format folded differs from query --format folded"
        "$PERFSNAPCTL" export "${W[@]}" -o "$T/cpu.speedscope.json" || fail "export speedscope failed"
        python3 - "$T" "$TOTAL" <<'PY' || fail "the SVG is wrong (above)"
import re, sys
import xml.etree.ElementTree as ET
t, total = sys.argv[1], int(sys.argv[2])
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(f"{t}/cpu.svg").getroot()
frames = {}
for g in root.iter(ns + "g"):
    title = g.find(ns + "title").text
    m = re.match(r"(.*) \((\d+) samples, ([\d.]+)%\)$", title)
    assert m, title
    fill = g.find(ns + "rect").get("fill")
    frames.setdefault(m.group(1), []).append((int(m.group(2)), fill))
assert frames["all"][0][0] == total, f"root {frames['all']} != {total}"
hue = lambda f: int(re.match(r"hsl\((\d+),", f).group(1))
assert all(hue(f) < 45 for _, f in frames["read_zero"]), frames["read_zero"]
assert all(hue(f) >= 185 for _, f in frames["named_leaf_gamma"]), frames["named_leaf_gamma"]
print(f"svg: {sum(len(v) for v in frames.values())} frames, root {total}, read_zero {frames['read_zero'][0]}")
# speedscope: the same stacks as the folded lines, weighted by CPU time.
import json, collections
d = json.load(open(f"{t}/cpu.speedscope.json"))
assert d["$schema"] == "https://www.speedscope.app/file-format-schema.json"
p = d["profiles"][0]
names = [f["name"] for f in d["shared"]["frames"]]
assert p["type"] == "sampled" and p["unit"] == "nanoseconds" and len(p["samples"]) == len(p["weights"])
period = p["endValue"] // total
assert p["endValue"] == total * period and period > 0, (p["endValue"], total)
ours = collections.Counter()
for s, w in zip(p["samples"], p["weights"]):
    ours[";".join(names[i] for i in s)] += w // period
folded = collections.Counter()
for line in open(f"{t}/export.folded"):
    stack, n = line.rstrip("\n").rsplit(" ", 1)
    folded[stack] += int(n)
# folded replaces ';' and blanks in names with '_'.
assert sum(ours.values()) == sum(folded.values()) == total, (sum(ours.values()), sum(folded.values()), total)
assert len(ours) == len(folded), (len(ours), len(folded))
print(f"speedscope: {len(p['samples'])} samples, {len(names)} frames, period {period} ns")
PY
        ;;
esac
stop_daemon
pass "export --format $FORMAT read by its tool"
