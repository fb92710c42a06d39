#!/bin/bash
# User frames named by their functions (issue 16, first part): a program
# with known function names (named-funcs, frame pointers on) runs under
# the real daemon; its samples name named_leaf_gamma and the chain
# named_outer_alpha -> named_middle_beta -> named_leaf_gamma in folded
# output. Then the binary is deleted and a new daemon still names them,
# from the function table it kept by build-id. A stripped copy is named
# through its separate debug file in a build-id directory (debug_root),
# another through its .gnu_debuglink, a copy without .symtab by its DWARF,
# and the functions DWARF says are inlined into named_leaf_gamma show with
# --inline. A copy that exists only in a private mount namespace is read
# through /proc/PID/root.
. "$(dirname "$0")/lib.sh"
require_root
command -v objcopy > /dev/null || skip "needs objcopy (binutils)"

setup_dir "frequency_hz = 999" "callchain_depth = 32" "debug_root = /nonexistent-debug-root"
BIN=$T/bin/named-funcs
mkdir -p "$T/bin"
cp "$NAMED_FUNCS" "$BIN"
BUILD_ID=$(build_id_of "$BIN")
[ -n "$BUILD_ID" ] || skip "named-funcs was linked without a build-id"
echo "named-funcs build-id $BUILD_ID"

# run_program PATH: starts the daemon, runs PATH for 2 s as $P1 (from
# $t0), waits until its samples are committed and a table was written.
run_program() {
        start_daemon
        t0=$(now_ns)
        "$1" 2 & P1=$!
        wait $P1 || fail "$1 failed"
        wait_committed "$(now_ns)"
        poll_field symbol_tables_written -ge 1
}

# MMAP2 records carry build-ids only where the kernel has
# PERF_RECORD_MISC_MMAP_BUILD_ID (5.12); without them no table is kept.
run_program "$BIN"
echo "status: symbol_files_seen $(status_field symbol_files_seen), written $FIELD," \
        "failed $(status_field symbol_tables_failed), last $(status_field symbol_table_last_ns) ns"
[ -f "$T/cache/.symbols/$BUILD_ID" ] || {
        ls -la "$T/cache/.symbols" 2>&1; cat "$T/daemon.log"
        fail "no function table for named-funcs ($BUILD_ID) in $T/cache/.symbols"
}
mode=$(stat -c %a "$T/cache/.symbols/$BUILD_ID")
dmode=$(stat -c %a "$T/cache/.symbols")
[ "$mode" = 400 ] && [ "$dmode" = 700 ] || fail "the table is mode $mode in a directory of mode $dmode, expected 400 in 700"
pass "named-funcs' function table kept by build-id (mode $mode, directory $dmode)"
ub=$(status_field user_frames_build_id); un=$(status_field user_frames_no_build_id); uu=$(status_field user_frames_unknown)
echo "status: user frames in files with a build-id $ub, without $un, unknown $uu"
[ "${ub:-0}" -ge 3 ] || fail "user_frames_build_id is '$ub': named-funcs' three functions were resolved"
pass "status counts user frames by how they can be named ($ub with a build-id, $un without, $uu unknown)"

# check_named FILE_PREFIX DESC [PROGRAM]: the table and folded queries of
# pid $P1, a run of PROGRAM (named-funcs).
check_named() {
        "$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --format json > "$T/$1.json" ||
                fail "query --format json failed ($2)"
        "$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --format folded > "$T/$1.folded" ||
                fail "query --format folded failed ($2)"
        "$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --top 4
        python3 - "$T/$1.json" "$T/$1.folded" "$2" "${3:-named-funcs}" <<'PY' || fail "named-funcs' frames are not named ($2, see above)"
import json, sys
rows = json.load(open(sys.argv[1]))["result"]["rows"]
total = sum(r["samples"] for r in rows)
user = [r for r in rows if not r["kernel"] and r["module"].endswith("/" + sys.argv[4])]
leaf = sum(r["samples"] for r in user if r["symbol"] == "named_leaf_gamma")
print(f"{sys.argv[3]}: {total} samples; leaf in {sys.argv[4]}: "
      f"{[(r['symbol'], r['samples']) for r in sorted(user, key=lambda r: -r['samples'])[:4]]}")
assert total >= 1000, f"expected >= 1000 samples (2 s at 999 Hz), got {total}"
assert leaf >= total // 2, f"only {leaf} of {total} samples have named_leaf_gamma as their leaf"
chain = "named_outer_alpha;named_middle_beta;named_leaf_gamma"
n_chain = n_all = 0
for line in open(sys.argv[2]):
    head, _, count = line.rstrip("\n").rpartition(" ")
    n_all += int(count)
    if chain in head:
        n_chain += int(count)
print(f"folded: {n_chain} of {n_all} samples hold {chain}")
if n_chain < n_all // 2: print(open(sys.argv[2]).read()[:3000])
assert n_chain >= n_all // 2, f"only {n_chain} of {n_all} folded samples hold {chain}"
PY
}

check_named live "binary present"
pass "named-funcs' leaf and its callers named while the binary exists"

# --inline: named_inlined_delta and named_inlined_epsilon (always_inline,
# in named_leaf_gamma) from DWARF: a row's "inlined", frames of their own
# in folded stacks; without --inline, no "inlined" at all.
"$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --inline --format json > "$T/inl.json" ||
        fail "query --inline failed"
"$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --inline --format folded > "$T/inl.folded" ||
        fail "query --inline --format folded failed"
"$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --inline --top 4
python3 - "$T/inl.json" "$T/inl.folded" "$T/live.json" <<'PY' || fail "--inline (see above)"
import json, sys
rows = json.load(open(sys.argv[1]))["result"]["rows"]
live = json.load(open(sys.argv[3]))["result"]["rows"]
gamma = [r for r in rows if r["symbol"] == "named_leaf_gamma"]
g_all = sum(r["samples"] for r in gamma)
g_eps = sum(r["samples"] for r in gamma if r.get("inlined") == "named_inlined_delta;named_inlined_epsilon")
g_delta = sum(r["samples"] for r in gamma if r.get("inlined") == "named_inlined_delta")
live_gamma = sum(r["samples"] for r in live if r["symbol"] == "named_leaf_gamma")
odd = [(r["symbol"], r.get("inlined")) for r in rows if r.get("inlined") and r["symbol"] != "named_leaf_gamma"]
print(f"--inline: named_leaf_gamma {g_all} samples (without --inline {live_gamma}): "
      f"in epsilon (in delta) {g_eps}, in delta only {g_delta}; inlined elsewhere: {odd}")
assert g_all == live_gamma, "--inline changed named_leaf_gamma's samples"
assert g_eps * 4 >= g_all, f"only {g_eps} of {g_all} samples in the inlined epsilon"
assert not odd
assert not any("inlined" in r for r in live), "a row has 'inlined' without --inline"
chain = "named_middle_beta;named_leaf_gamma;named_inlined_delta;named_inlined_epsilon"
n = sum(int(l.rpartition(" ")[2]) for l in open(sys.argv[2]) if chain in l.rpartition(" ")[0])
print(f"--inline folded: {n} samples hold ...;{chain}")
assert n * 4 >= g_all, f"only {n} folded samples hold {chain}"
PY
pass "--inline names the functions inlined into named_leaf_gamma (rows and folded)"

# A call made from inlined code: the caller frame's return address is the
# instruction after the call, outside named_inlined_eta's code; its chain
# is looked up at the call (the byte before), as for any return address.
t2=$(now_ns)
"$BIN" 2 inlined-call & P2=$!
wait $P2 || fail "named-funcs 2 inlined-call failed"
wait_committed "$(now_ns)"
"$PERFSNAPCTL" query --since @$((t2 / 1000000000)) --pid $P2 --inline --format folded > "$T/inl2.folded" ||
        fail "query --inline --format folded of the inlined call failed"
python3 - "$T/inl2.folded" <<'PY' || fail "the inlined call's frame (see above)"
import sys
lines = [l.rstrip("\n").rpartition(" ") for l in open(sys.argv[1])]
total = sum(int(c) for _, _, c in lines)
want = "named_caller_theta;named_inlined_eta;named_callee_zeta"
n = sum(int(c) for h, _, c in lines if want in h)
print(f"inlined call: {n} of {total} folded samples hold {want}")
if n * 2 < total: print(open(sys.argv[1]).read()[:2000])
assert total >= 1000 and n * 2 >= total
PY
pass "a call from inlined code shows the inlined function between caller and callee"

# --user-only: every row a user frame (or [unknown]); the kernel time of
# named-funcs (timer interrupts, clock_gettime) goes to its own code.
# --kernel-only: every row a kernel frame (or [unknown]).
for only in user kernel; do
        "$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --$only-only --format json > "$T/$only.json" ||
                fail "query --$only-only failed"
        "$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --$only-only --format folded > "$T/$only.folded" ||
                fail "query --$only-only --format folded failed"
done
python3 - "$T/user.json" "$T/kernel.json" "$T/user.folded" "$T/live.json" <<'PY' || fail "--user-only / --kernel-only (see above)"
import json, sys
user, kernel, live = (json.load(open(sys.argv[i]))["result"]["rows"] for i in (1, 2, 4))
tot = lambda rows: sum(r["samples"] for r in rows)
wrong_u = [(r["symbol"], r["samples"]) for r in user if r["kernel"]]
wrong_k = [(r["symbol"], r["samples"]) for r in kernel if not r["kernel"] and r["symbol"] != "[unknown]"]
leaf = sum(r["samples"] for r in user if r["symbol"] == "named_leaf_gamma")
live_leaf = sum(r["samples"] for r in live if r["symbol"] == "named_leaf_gamma")
print(f"--user-only: {tot(user)} samples, named_leaf_gamma {leaf} (all frames: {live_leaf}), kernel rows {wrong_u}; "
      f"--kernel-only: {tot(kernel)} samples, user rows {wrong_k}")
res = json.load(open(sys.argv[1]))["result"]
named, by_off, unk = res["user_named"], res["user_by_offset"], res["user_unknown"]
no_user = sum(r["samples"] for r in user if r["symbol"] == "[unknown]" and r["module"] == "[unknown]")
print(f"--user-only: user leaves named {named}, by offset {by_off}, unknown {unk}; samples without user frames {no_user}")
assert named >= leaf and named + by_off + unk + no_user == res["total"], "the user-frame counts do not add up"
assert named * 10 >= res["total"] * 9, f"only {named} of {res['total']} user leaves named"

assert tot(user) == tot(live) == tot(kernel), "totals differ"
assert not wrong_u and not wrong_k
assert leaf >= live_leaf, f"--user-only gave named_leaf_gamma {leaf} < {live_leaf}"
for line in open(sys.argv[3]):
    head = line.rpartition(" ")[0]
    for f in head.split(";")[1:]:
        assert not f.startswith(("asm_", "entry_SYSCALL", "__x64_sys", "irqentry")), f"kernel frame {f} in --user-only folded"
PY
pass "--user-only rows and stacks hold user frames only, --kernel-only rows kernel frames only"

# --dso: rows of that file only, by its name or its path.
for d in named-funcs "$BIN"; do
        "$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --dso "$d" --format json > "$T/dso.json" ||
                fail "query --dso $d failed"
        python3 - "$T/dso.json" "$T/live.json" "$d" <<'PY' || fail "--dso $d (see above)"
import json, sys
rows = json.load(open(sys.argv[1]))["result"]["rows"]
live = [r for r in json.load(open(sys.argv[2]))["result"]["rows"] if r["module"].endswith("/named-funcs")]
other = [(r["module"], r["symbol"]) for r in rows if not r["module"].endswith("/named-funcs")]
print(f"--dso {sys.argv[3]}: {len(rows)} rows, {sum(r['samples'] for r in rows)} samples "
      f"(named-funcs rows without it: {sum(r['samples'] for r in live)}); other modules: {other}")
assert rows and not other
assert sum(r["samples"] for r in rows) == sum(r["samples"] for r in live)
PY
done
pass "--dso keeps the rows of that file, by name or path"

# dd: libc's frames by name. With --user-only each sample's row is the
# user frame that entered the kernel (libc's read and write, exported in
# its .dynsym): 80 % of the samples in named rows, no row of 5 % or more
# a bare offset.
t1=$(now_ns)
dd if=/dev/zero of=/dev/null bs=64k count=200000 2>/dev/null & DDP=$!
wait $DDP
wait_committed "$(now_ns)"
"$PERFSNAPCTL" query --since @$((t1 / 1000000000)) --pid $DDP --user-only --top 10 --format json > "$T/dd.json" ||
        fail "query of dd failed"
"$PERFSNAPCTL" query --since @$((t1 / 1000000000)) --pid $DDP --user-only --top 5
python3 - "$T/dd.json" <<'PY' || fail "dd's top user rows hold raw offsets (see above)"
import json, re, sys
rows = json.load(open(sys.argv[1]))["result"]["rows"]
total = json.load(open(sys.argv[1]))["result"]["total"]
# Unnamed: "0x<addr>", or "FILE+0x<offset>" for a frame in a file.
unnamed = lambda sym: re.fullmatch(r"([^ ]*\+)?0x[0-9a-f]+", sym) is not None
raw = [(r["module"], r["symbol"], r["samples"]) for r in rows if unnamed(r["symbol"])]
named = sum(r["samples"] for r in rows if not unnamed(r["symbol"]) and not r["symbol"].startswith("["))
# dd itself is stripped (its own frames need coreutils' debug file): its
# few samples in its own code may stay offsets; no row of 5 % or more may.
big_raw = [x for x in raw if x[2] * 20 >= total]
print(f"dd: {total} samples, {named} in named rows of its top {len(rows)}; raw rows: {raw}")
assert rows and named * 5 >= total * 4, f"only {named} of {total} samples in named rows"
assert not big_raw, f"rows of 5 % or more are offsets: {big_raw}"
PY
pass "dd's top user rows are libc functions by name"

# The binary deleted, the daemon restarted: still named, from the table.
rm -f "$BIN"
stop_daemon
start_daemon
check_named deleted "binary deleted, new daemon"
pass "still named after the binary was deleted and the daemon restarted"

# A process that was running before the daemon started: known from
# /proc/PID/maps, which has no build-ids; the daemon reads the file's
# (its inode checked against the mapping's) and names it the same way.
stop_daemon
"$NAMED_FUNCS" 6 & P1=$!
sleep 0.5
start_daemon
t0=$(now_ns)
wait $P1 || fail "named-funcs failed"
wait_committed "$(now_ns)"
check_named early "running before the daemon"
pass "a process older than the daemon named (its build-id read from the file /proc/PID/maps names)"

# A stripped copy (another build-id) with its debug file in a build-id
# directory: named through debug_root.
DBG=$T/debug
stop_daemon
cp "$NAMED_FUNCS" "$T/bin/stripped-funcs"
# Another build-id than named-funcs' (whose table is kept already): one
# byte of the note's payload changed in place.
change_build_id "$T/bin/stripped-funcs" 0xff
SBID=$(build_id_of "$T/bin/stripped-funcs")
[ -n "$SBID" ] && [ "$SBID" != "$BUILD_ID" ] || fail "the copy's build-id is $SBID"
mkdir -p "$DBG/.build-id/${SBID:0:2}"
objcopy --only-keep-debug "$T/bin/stripped-funcs" "$DBG/.build-id/${SBID:0:2}/${SBID:2}.debug"
objcopy --strip-all "$T/bin/stripped-funcs"
readelf -S "$T/bin/stripped-funcs" | grep -q '\.symtab' && fail "the stripped copy still has a .symtab"
sed -i "s|^debug_root = .*|debug_root = $DBG|" "$CONF"
run_program "$T/bin/stripped-funcs"
[ -f "$T/cache/.symbols/$SBID" ] || { cat "$T/daemon.log"; fail "no function table for the stripped copy ($SBID)"; }
check_named stripped "stripped, debug file" stripped-funcs
pass "a stripped binary named through DEBUG_ROOT/.build-id/${SBID:0:2}/${SBID:2}.debug"
stop_daemon

# variant NAME MASK: a copy of named-funcs at $T/bin/NAME with a build-id
# of its own ($VBID).
variant() {
        cp "$NAMED_FUNCS" "$T/bin/$1"
        change_build_id "$T/bin/$1" "$2"
        VBID=$(build_id_of "$T/bin/$1")
        [ -n "$VBID" ] && [ ! -e "$T/cache/.symbols/$VBID" ] || fail "the copy $1 has build-id '$VBID', not a new one"
}

# .gnu_debuglink: a stripped copy whose debug file is in .debug/ beside it
# (nothing in DEBUG_ROOT's build-id directory).
variant linked-funcs 0xfe
objcopy --only-keep-debug "$T/bin/linked-funcs" "$T/bin/linked-funcs.debug"
objcopy --strip-all --add-gnu-debuglink="$T/bin/linked-funcs.debug" "$T/bin/linked-funcs"
mkdir -p "$T/bin/.debug"
mv "$T/bin/linked-funcs.debug" "$T/bin/.debug/"
[ ! -e "$DBG/.build-id/${VBID:0:2}/${VBID:2}.debug" ] || fail "a build-id debug file exists for linked-funcs"
run_program "$T/bin/linked-funcs"
check_named linked "stripped, .gnu_debuglink" linked-funcs
pass "a stripped binary named through its .gnu_debuglink (.debug/linked-funcs.debug beside it)"
stop_daemon

# The same with a binary of another owner (nobody) and a debug file only
# root may read: not used (a .gnu_debuglink is the binary's to name, and
# must not make root read a file its owner may not).
variant private-funcs 0xfb
objcopy --only-keep-debug "$T/bin/private-funcs" "$T/bin/private-funcs.debug"
objcopy --strip-all --add-gnu-debuglink="$T/bin/private-funcs.debug" "$T/bin/private-funcs"
mv "$T/bin/private-funcs.debug" "$T/bin/.debug/"
chmod 600 "$T/bin/.debug/private-funcs.debug"
chown nobody "$T/bin/private-funcs"
run_program "$T/bin/private-funcs"
"$PERFSNAPCTL" query --since @$((t0 / 1000000000)) --pid $P1 --format json > "$T/private.json" || fail "query failed"
python3 - "$T/private.json" <<'PY' || fail "a root-only debug file named another owner's binary (see above)"
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["result"]["rows"] if r["module"].endswith("/private-funcs")]
named = [(r["symbol"], r["samples"]) for r in rows if r["symbol"].startswith("named_")]
print(f"private-funcs rows: {[(r['symbol'], r['samples']) for r in rows][:4]}")
assert rows and not named
PY
pass "a debug file only root may read is not used for another owner's binary"
stop_daemon

# DWARF only: no .symtab, and the .dynsym names none of its functions.
variant dwarf-funcs 0xfd
objcopy --strip-all --keep-section='.debug_*' "$T/bin/dwarf-funcs"
readelf -S "$T/bin/dwarf-funcs" | grep -q '\.symtab' && fail "dwarf-funcs still has a .symtab"
readelf -S "$T/bin/dwarf-funcs" | grep -q '\.debug_info' || fail "dwarf-funcs has no .debug_info"
run_program "$T/bin/dwarf-funcs"
check_named dwarf "no .symtab, DWARF" dwarf-funcs
pass "a binary without .symtab named by its DWARF"
stop_daemon

# Another mount namespace: the binary exists only on a tmpfs mounted in
# the process's own namespace (unshare -m, private propagation); the
# daemon reads it through /proc/PID/root.
if unshare -m true 2> /dev/null; then
        variant ns-funcs 0xfc
        mkdir -p "$T/ns"
        start_daemon
        t0=$(now_ns)
        unshare -m --propagation private sh -c \
                "mount -t tmpfs tmpfs '$T/ns' && cp '$T/bin/ns-funcs' '$T/ns/ns-funcs' && exec '$T/ns/ns-funcs' 2" & P1=$!
        sleep 0.5
        [ -e "$T/ns/ns-funcs" ] && fail "$T/ns/ns-funcs is visible outside the process's mount namespace"
        rm -f "$T/bin/ns-funcs"
        wait $P1 || fail "ns-funcs in its mount namespace failed"
        wait_committed "$(now_ns)"
        poll_field symbol_tables_written -ge 1
        [ -f "$T/cache/.symbols/$VBID" ] || { cat "$T/daemon.log"; fail "no function table for ns-funcs ($VBID)"; }
        check_named ns "only in another mount namespace" ns-funcs
        pass "a binary that exists only in the process's mount namespace named (read through /proc/PID/root)"
        stop_daemon
else
        echo "SKIP: unshare -m is refused here; the mount namespace case is not checked"
fi
