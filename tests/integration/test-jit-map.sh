#!/bin/bash
# JIT frames named from /tmp/perf-PID.map (issue 16): node with
# --perf-basic-prof writes a map line for each function it compiles; the
# daemon names the samples in that code as it stores them (the map and
# the process may be gone when a query comes), so after node exits and
# its map is deleted a new daemon still names them. Skipped without node
# (Debian package nodejs).
. "$(dirname "$0")/lib.sh"
require_root
NODE=$(command -v node || command -v nodejs) || skip "needs node (Debian package nodejs)"
JS=$(dirname "$(readlink -f "$0")")/jit-spin.js

setup_dir "frequency_hz = 999" "callchain_depth = 64"
start_daemon
t0=$(now_ns)
# In $T: node writes an isolate-*-v8.log into its working directory.
(cd "$T" && exec "$NODE" --perf-basic-prof "$JS" 2000 > /dev/null) & P1=$!
wait $P1 || fail "node failed"
wait_committed "$(now_ns)"
[ -f /tmp/perf-$P1.map ] || skip "node --perf-basic-prof wrote no /tmp/perf-$P1.map"
lines=$(grep -c 'namedJs' /tmp/perf-$P1.map)
echo "node $("$NODE" --version), pid $P1: /tmp/perf-$P1.map has $(wc -l < /tmp/perf-$P1.map) lines, $lines for namedJs*;" \
        "status jit_frames $(status_field jit_frames)"
rm -f /tmp/perf-$P1.map
stop_daemon
start_daemon

"$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --top 5
"$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --format json > "$T/q.json" || fail "query failed"
"$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --format folded > "$T/q.folded" || fail "query failed"
python3 - "$T/q.json" "$T/q.folded" <<'PY' || fail "node's JIT frames are not named (see above)"
import json, sys
rows = json.load(open(sys.argv[1]))["result"]["rows"]
total = sum(r["samples"] for r in rows)
js = sum(r["samples"] for r in rows if "namedJsLeafGamma" in r["symbol"] or "namedJsOuterAlpha" in r["symbol"])
anon_hex = sum(r["samples"] for r in rows if r["module"] == "//anon" and r["symbol"].startswith("0x"))
print(f"node: {total} samples; leaf in namedJs*: {js}; unnamed JIT leaves: {anon_hex}")
assert total >= 1000, f"expected >= 1000 samples (2 s at 999 Hz), got {total}"
assert js >= total // 2, f"only {js} of {total} samples have a namedJs* leaf"
# The map is written as code is compiled and re-read at most 10 times a
# second: samples of a function compiled after the last read and before
# the next stay unnamed, a fraction of a second's worth.
assert anon_hex <= total // 10, f"{anon_hex} of {total} samples have an unnamed JIT leaf"
PY
pass "node's JIT frames named from its perf map, after node and its map are gone"
stop_daemon
