#!/bin/bash
# Debug files from debuginfod (issue 16): a local debuginfod server
# (elfutils) serves the unstripped twin of a stripped program; with
# debuginfod_urls set, the daemon asks it for the program's debug file and
# names the frames; with debuginfod_urls empty (and DEBUGINFOD_URLS set in
# the daemon's environment, as Debian's login shells do), the server sees
# no request at all.
. "$(dirname "$0")/lib.sh"
require_root
command -v debuginfod > /dev/null || skip "needs debuginfod (Debian package debuginfod)"
command -v objcopy > /dev/null || skip "needs objcopy (binutils)"

setup_dir "frequency_hz = 999" "callchain_depth = 32" "debug_root ="
# In the sanitizer build, whole malloc stacks, so that tests/lsan.supp can
# tell libdebuginfod's leak from ours (ignored by other builds).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
mkdir -p "$T/srv" "$T/bin"

# make_pair N: $T/srv/funcs-N (unstripped, served) and $T/bin/funcs-N (its
# stripped copy), with a build-id of their own; prints the build-id.
make_pair() {
        cp "$NAMED_FUNCS" "$T/srv/funcs-$1"
        change_build_id "$T/srv/funcs-$1" $((0x40 + $1))
        cp "$T/srv/funcs-$1" "$T/bin/funcs-$1"
        objcopy --strip-all "$T/bin/funcs-$1"
        build_id_of "$T/bin/funcs-$1"
}

B1=$(make_pair 1)
B2=$(make_pair 2)
[[ $B1 =~ ^[0-9a-f]{40}$ && $B2 =~ ^[0-9a-f]{40}$ && $B1 != "$B2" ]] || fail "build-ids '$B1' '$B2'"

PORT=$((20000 + RANDOM % 20000))
debuginfod -F -p $PORT -d "$T/debuginfod.sqlite" -t 0 -g 0 -vv "$T/srv" > "$T/debuginfod.log" 2>&1 &
SRV=$!
trap 'kill $SRV 2>/dev/null; cleanup' EXIT
# Ready when it serves funcs-1's debug file.
for _ in $(seq 1 100); do
        python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/buildid/$B1/debuginfo', timeout=2)" 2>/dev/null && break
        kill -0 $SRV 2>/dev/null || { cat "$T/debuginfod.log"; skip "debuginfod did not start"; }
        sleep 0.2
done
python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/buildid/$B1/debuginfo', timeout=2)" ||
        { tail -20 "$T/debuginfod.log"; fail "debuginfod does not serve $B1 after 20 s"; }
pass "debuginfod on port $PORT serves the debug file of $B1"

# requests BUILD_ID: how many requests for it the server logged.
requests() { grep -c "/buildid/$1/" "$T/debuginfod.log"; }

echo "debuginfod_urls = http://127.0.0.1:$PORT" >> "$CONF"
start_daemon
t0=$(now_ns)
"$T/bin/funcs-1" 2 & P1=$!
wait $P1 || fail "funcs-1 failed"
wait_committed "$(now_ns)"
poll_field symbol_debuginfod_found -ge 1
found=$FIELD
echo "status: debuginfod found $found, missed $(status_field symbol_debuginfod_missed); server requests for $B1: $(requests "$B1")"
[ "$found" -ge 1 ] || { cat "$T/daemon.log"; fail "symbol_debuginfod_found is '$found'"; }
"$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --format json > "$T/q1.json" || fail "query failed"
python3 - "$T/q1.json" <<'PY' || fail "funcs-1's frames are not named from debuginfod's debug file (see above)"
import json, sys
rows = json.load(open(sys.argv[1]))["result"]["rows"]
total = sum(r["samples"] for r in rows)
leaf = sum(r["samples"] for r in rows if r["module"].endswith("/funcs-1") and r["symbol"] == "named_leaf_gamma")
print(f"funcs-1: {total} samples, {leaf} with named_leaf_gamma as their leaf")
assert total >= 1000 and leaf >= total // 2, f"{leaf} of {total}"
PY
pass "a stripped program named through its debug file from debuginfod"
stop_daemon

# debuginfod_urls empty, DEBUGINFOD_URLS in the environment: no request.
sed -i '/^debuginfod_urls/d' "$CONF"
before=$(requests "$B2")
DEBUGINFOD_URLS=http://127.0.0.1:$PORT start_daemon
"$T/bin/funcs-2" 2 & P2=$!
wait $P2 || fail "funcs-2 failed"
wait_committed "$(now_ns)"
poll_until test -f "$T/cache/.symbols/$B2"
[ -f "$T/cache/.symbols/$B2" ] || fail "no table for funcs-2 ($B2)"
after=$(requests "$B2")
echo "server requests for $B2: $before -> $after; status debuginfod found $(status_field symbol_debuginfod_found), missed $(status_field symbol_debuginfod_missed)"
[ "$after" = "$before" ] || fail "the server got $((after - before)) requests for $B2 with debuginfod_urls empty"
pass "debuginfod_urls empty: no request reached the server, though DEBUGINFOD_URLS was set"
stop_daemon
