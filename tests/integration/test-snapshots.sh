#!/bin/bash
# kcore snapshots with the real perfsnapd and perfsnapctl, real perf events
# and a synthetic root (this machine has no /proc/kcore and no loadable
# modules): ROOT/proc/kcore is an ET_CORE file the test writes, with ~48 MiB
# of kernel text so that a copy takes measurable time.
#  1. the start-up snapshot: perf's build-id cache layout, mode 0400 files,
#     a kcore copy holding the wanted ranges byte for byte;
#  2. a module appears: a new snapshot after snapshot_delay; it goes
#     again: the first snapshot is reused; the journal says so;
#  3. every stored sample links to the snapshot of the layout it was
#     taken in (sqlite3 on the database);
#  4. (after 5) perfsnapctl snapshot reuses the current one; cache prune
#     keeps the newest and the current one; non-root may list, not prune;
#  5. no sample lost at the default frequency and ring buffer size while
#     five 48 MiB copies are made;
#  6. a kcore that is not ELF: the snapshot fails, is reported, leaves
#     nothing behind, and the daemon keeps answering;
#  7. (last) root = / on this host: snapshots without kcore;
#  8. kill -9 during a copy: the restart cleans CACHE/.tmp.
. "$(dirname "$0")/lib.sh"
require_root
use_group

setup_dir "group = $GROUP" "rescan_interval = never" "snapshot_delay = 300ms"
chmod 755 "$T"
CACHE=$T/cache
R=$T/root
BUSY=
trap '[ -n "$BUSY" ] && kill "$BUSY" 2>/dev/null; cleanup' EXIT
# Soft failures: checks after them still run; the test fails at the end.
FAILED=0
soft_fail() { echo "FAIL: $*"; FAILED=1; }
# Sanitizer reports of a build with -Db_sanitize go to the daemon's log,
# which each start overwrites.
check_log() {
        ! grep -E "runtime error:|Sanitizer" "$T/daemon.log" || soft_fail "sanitizer reports in perfsnapd's log (above)"
}

mkdir -p "$R/proc/sys/kernel/random" "$R/sys/kernel" "$R/sys/module"
FIXTURES=$(dirname "$0")/../fixtures
cp "$FIXTURES/kernel-6.1-brd/sys/kernel/notes" "$R/sys/kernel/notes"
echo 6.1.0-synthetic > "$R/proc/sys/kernel/osrelease"
cat /proc/sys/kernel/random/boot_id > "$R/proc/sys/kernel/random/boot_id"
echo "root = $R" >> "$CONF"

# The synthetic kernel: _text = _stext at TEXT, _etext 48 MiB above; modules
# between MODS and MODS + 4 MiB.
TEXT=ffffffff81000000
ETEXT=ffffffff84000000
MODS=ffffffffc0a00000

# The ELF helpers: "gen OUT" writes the kcore-like file; "check COPY SRC
# STEXT ETEXT MOD_START MOD_END" compares a copy with its source.
cat > "$T/elf.py" <<'EOF'
import os, random, struct, sys

TEXT, TEXT_LEN = 0xffffffff81000000, 48 << 20
MODS, MODS_LEN = 0xffffffffc0a00000, 4 << 20
DIRECT, DIRECT_LEN = 0xffff888000000000, 1 << 20
PF_X, PF_W, PF_R = 1, 2, 4
PT_LOAD, ET_CORE = 1, 4

def phdrs(path):
    with open(path, "rb") as f:
        eh = f.read(64)
        if len(eh) < 64 or eh[:4] != b"\x7fELF":
            raise SystemExit("%s: not an ELF file" % path)
        if eh[4] != 2 or eh[5] != 1:
            raise SystemExit("%s: not ELF64 little-endian" % path)
        e_type, e_machine, _, _, e_phoff, _, _, _, e_phentsize, e_phnum = struct.unpack_from("<HHIQQQIHHH", eh, 16)
        f.seek(e_phoff)
        ph = [struct.unpack("<IIQQQQQQ", f.read(e_phentsize)[:56]) for _ in range(e_phnum)]
    return e_type, e_machine, [dict(zip(("type", "flags", "offset", "vaddr", "paddr", "filesz", "memsz", "align"), p))
                               for p in ph]

def gen(out):
    # text: the wanted 48 MiB and 2 MiB more; the module area with
    # "no physical address"; a direct-map piece that is not executable.
    segs = [(TEXT, 0x1000000, TEXT_LEN + (2 << 20), PF_R | PF_W | PF_X),
            (MODS, (1 << 64) - 1, MODS_LEN, PF_R | PF_W | PF_X),
            (DIRECT, 0, DIRECT_LEN, PF_R | PF_W)]
    rnd = random.Random(6)
    off = 4096
    hdr = bytearray(b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8))
    hdr += struct.pack("<HHIQQQIHHHHHH", ET_CORE, 62, 1, 0, 64, 0, 0, 64, 56, len(segs), 64, 0, 0)
    data = []
    for vaddr, paddr, size, flags in segs:
        hdr += struct.pack("<IIQQQQQQ", PT_LOAD, flags, off, vaddr, paddr, size, size, 4096)
        # Random bytes with no zero among them: nothing sparse.
        data.append((off, rnd.randbytes(size).replace(b"\0", b"\x5a")))
        off += size
    with open(out, "wb") as f:
        f.write(hdr)
        for o, d in data:
            f.seek(o)
            f.write(d)

def check(copy, src, stext, etext, mstart, mend):
    e_type, e_machine, cph = phdrs(copy)
    _, s_machine, sph = phdrs(src)
    loads = [p for p in cph if p["type"] == PT_LOAD]
    print("copy: e_type %d, e_machine %d, %d PT_LOADs: %s" % (e_type, e_machine, len(loads),
          ["%#x+%#x" % (p["vaddr"], p["filesz"]) for p in loads]))
    if e_type != ET_CORE or e_machine != s_machine:
        raise SystemExit("copy is not an ET_CORE file of machine %d" % s_machine)
    want = [(stext, etext), (mstart, mend)]
    if len(loads) != 2 or (loads[0]["vaddr"], loads[0]["vaddr"] + loads[0]["filesz"]) != want[0] \
       or loads[1]["vaddr"] != mstart or loads[1]["vaddr"] + loads[1]["filesz"] > mend:
        raise SystemExit("expected 2 PT_LOADs, text %#x-%#x and modules from %#x below %#x" % (stext, etext, mstart, mend))
    rnd = random.Random(1)
    checked = 0
    with open(copy, "rb") as c, open(src, "rb") as s:
        for p in loads:
            sp = [q for q in sph if q["type"] == PT_LOAD and q["vaddr"] <= p["vaddr"] < q["vaddr"] + q["filesz"]][0]
            for d in [0, p["filesz"] - 4096, p["filesz"] // 2] + [rnd.randrange(0, p["filesz"] - 4096) for _ in range(16)]:
                c.seek(p["offset"] + d)
                s.seek(sp["offset"] + p["vaddr"] - sp["vaddr"] + d)
                a, b = c.read(4096), s.read(4096)
                if a != b or len(a) != 4096:
                    raise SystemExit("bytes at %#x differ between copy and source" % (p["vaddr"] + d))
                checked += 1
    print("%d pages of the copy equal the source's at the same addresses" % checked)

if sys.argv[1] == "gen":
    gen(sys.argv[2])
elif sys.argv[1] == "check":
    check(sys.argv[2], sys.argv[3], *(int(x, 16) for x in sys.argv[4:8]))
EOF
python3 "$T/elf.py" gen "$T/kcore.good" || fail "could not write the synthetic kcore"
cp "$T/kcore.good" "$R/proc/kcore"

# kallsyms_file MODULE:ADDR...: the synthetic kallsyms, with one function
# per module.
kallsyms_file() {
        {
                echo "$TEXT T _text"
                echo "$TEXT T _stext"
                echo "ffffffff81000100 T start_kernel"
                echo "ffffffff82000000 T schedule"
                echo "ffffffff83fff000 T do_idle"
                echo "$ETEXT T _etext"
                echo "ffffffff84200000 D _sdata"
                for m in "$@"; do printf '%s t %s_fn\t[%s]\n' "${m#*:}" "${m%%:*}" "${m%%:*}"; done
        } > "$R/proc/kallsyms"
}

mkmod fake_a ffffffffc0a00000
kallsyms_file fake_a:ffffffffc0a00010
modules_file "fake_a 16384 0 - Live 0xffffffffc0a00000"
BUILD_ID=$(python3 - "$R/sys/kernel/notes" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
o = 0
while o + 12 <= len(b):
    nsz, dsz, typ = struct.unpack_from("<III", b, o)
    name = b[o + 12:o + 12 + nsz]
    d = o + 12 + (nsz + 3) // 4 * 4
    if typ == 3 and name == b"GNU\0":
        print(b[d:d + dsz].hex())
        break
    o = d + (dsz + 3) // 4 * 4
EOF
)
[ -n "$BUILD_ID" ] || fail "no build-id in the fixture's notes"

CTL=$PERFSNAPCTL
json() { "$CTL" "$@" --format json; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }
st() { json status | field "d['$1']"; }
# wait_status EXPR: polls status until the python expression over d holds
# and no snapshot is pending (at most 20 s).
wait_status() {
        for _ in $(seq 1 200); do
                json status | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) and not d['snapshot_pending'] else 1)" && return 0
                sleep 0.1
        done
        return 1
}
# The snapshot directories under the cache, oldest first.
snapdirs() { ls -d "$CACHE/[kernel.kcore]"/*/* 2>/dev/null | sort; }

# Something for the sampler to see.
python3 -c 'while True: pass' &
BUSY=$!

# ---- 1. the start-up snapshot ----
start_daemon
wait_status "d['snapshots_created'] >= 1" || fail "no start-up snapshot within 20 s: $(json status | field '{k: v for k, v in d.items() if k.startswith("snapshot")}')"
created=$(st snapshots_created)
[ "$created" = 1 ] || fail "snapshots_created is $created after start-up, expected 1"
grep "Created snapshot" "$T/daemon.log"
json cache list > "$T/l1.json"
nmod=$(wc -l < "$R/proc/modules")
python3 - "$T/l1.json" "$nmod" "0x$TEXT" <<'EOF' || fail "cache list after start-up is wrong (see above)"
import json, sys
s = json.load(open(sys.argv[1]))["snapshots"]
print("cache list:", [(x["name"], x["modules"], x["text_addr"], x["kcore"], x["current"]) for x in s])
sys.exit(0 if len(s) == 1 and s[0]["kcore"] is True and s[0]["modules"] == int(sys.argv[2])
         and s[0]["text_addr"] == sys.argv[3] and s[0]["current"] is True else 1)
EOF
SNAP1=$(field 'd["snapshots"][0]["path"]' < "$T/l1.json")
[[ "$SNAP1" =~ ^"$CACHE/[kernel.kcore]/$BUILD_ID/"[0-9]{16}$ ]] || fail "snapshot path $SNAP1 is not CACHE/[kernel.kcore]/$BUILD_ID/<16 digits>"
[ "$(snapdirs)" = "$SNAP1" ] || fail "directories in the cache: $(snapdirs), expected $SNAP1 only"
modes=$(cd "$SNAP1" && stat -c '%n:%a' kallsyms kcore modules | tr '\n' ' ')
[ "$modes" = "kallsyms:400 kcore:400 modules:400 " ] || fail "snapshot files: $modes, expected kallsyms, kcore, modules with mode 400"
cmp -s "$SNAP1/kallsyms" "$R/proc/kallsyms" && cmp -s "$SNAP1/modules" "$R/proc/modules" || fail "kallsyms or modules of $SNAP1 differ from the root's"
pass "start-up snapshot $SNAP1: 1 created, $nmod module, _text 0x$TEXT, files mode 0400"
# The module area wanted: from fake_a's base to its last kallsyms line + a page.
python3 "$T/elf.py" check "$SNAP1/kcore" "$R/proc/kcore" $TEXT $ETEXT ffffffffc0a00000 ffffffffc0a02000 ||
        fail "the kcore copy of $SNAP1 is wrong"
pass "kcore copy: ET_CORE, 2 PT_LOADs (text, module area), bytes equal the source's"

# ---- 2. a module appears, then goes ----
reused0=$(st snapshots_reused)
mkmod fake_b ffffffffc0c00000
kallsyms_file fake_a:ffffffffc0a00010 fake_b:ffffffffc0c00020
modules_file "fake_b 8192 0 - Live 0xffffffffc0c00000" "fake_a 16384 0 - Live 0xffffffffc0a00000"
out=$("$CTL" rescan) || fail "rescan failed: $out"
echo "$out" | grep -q "1 added, 0 removed" || fail "rescan after fake_b appeared: $out"
wait_status "d['snapshots_created'] >= 2" || fail "no snapshot within 20 s of fake_b's load: created $(st snapshots_created)"
created=$(st snapshots_created)
[ "$created" = 2 ] || fail "snapshots_created is $created after fake_b's load, expected 2"
SNAP2=$(st snapshot_current)
[ "$SNAP2" != "$SNAP1" ] && [ "$(snapdirs | tr '\n' ' ')" = "$SNAP1 $SNAP2 " ] ||
        fail "after fake_b's load: current $SNAP2, directories $(snapdirs | tr '\n' ' ')"
[ "$(wc -l < "$SNAP2/modules")" = 2 ] || fail "$SNAP2/modules has $(wc -l < "$SNAP2/modules") lines, expected 2"
python3 "$T/elf.py" check "$SNAP2/kcore" "$R/proc/kcore" $TEXT $ETEXT ffffffffc0a00000 ffffffffc0c02000 ||
        fail "the kcore copy of $SNAP2 is wrong"
pass "fake_b loaded: snapshot $SNAP2 created, modules range up to fake_b"
# Part 3 looks for one-second buckets wholly inside fake_b's time: it must
# stay loaded for more than 2 s whatever the clock's phase (it was loaded
# at least 300 ms ago: the snapshot's debounce). With 1 s it was loaded
# 1.95 s in one CI run, and no bucket fitted.
sleep 2
rm -rf "$R/sys/module/fake_b"
kallsyms_file fake_a:ffffffffc0a00010
modules_file "fake_a 16384 0 - Live 0xffffffffc0a00000"
out=$("$CTL" rescan) || fail "rescan failed: $out"
echo "$out" | grep -q "0 added, 1 removed" || fail "rescan after fake_b went: $out"
wait_status "d['snapshots_reused'] >= $((reused0 + 1))" || fail "no snapshot reused within 20 s of fake_b's unload: reused $(st snapshots_reused)"
reused=$(st snapshots_reused); created=$(st snapshots_created); cur=$(st snapshot_current)
[ "$reused" = $((reused0 + 1)) ] && [ "$created" = 2 ] && [ "$cur" = "$SNAP1" ] ||
        fail "after fake_b's unload: reused $reused0 -> $reused, created $created, current $cur (expected +1, 2, $SNAP1)"
[ "$(snapdirs | tr '\n' ' ')" = "$SNAP1 $SNAP2 " ] || fail "after the reuse the cache holds $(snapdirs | tr '\n' ' ')"
pass "fake_b unloaded: $SNAP1 reused (snapshots_reused $reused0 -> $reused), no new directory"

json events > "$T/e.json"
json cache list > "$T/l2.json"
python3 - "$T/e.json" "$T/l2.json" "$SNAP1" "$SNAP2" > "$T/times" <<'EOF' || fail "the journal's snapshot entries are wrong (see above)"
import json, sys
ev = json.load(open(sys.argv[1]))["events"]
ids = {x["path"]: x["id"] for x in json.load(open(sys.argv[2]))["snapshots"]}
s1, s2 = sys.argv[3], sys.argv[4]
snaps = [(e["kind"], e["snapshot"], e["snapshot_id"]) for e in ev if e["kind"].startswith("snapshot-")]
mods = [(e["kind"], e["module"], e["time_ns"]) for e in ev if e["kind"].startswith("module-")]
print(snaps, mods, file=sys.stderr)
want = [("snapshot-created", s1, ids[s1]), ("snapshot-created", s2, ids[s2]), ("snapshot-reused", s1, ids[s1])]
if snaps != want or [m[:2] for m in mods] != [("module-add", "fake_b"), ("module-remove", "fake_b")]:
    sys.exit(1)
t_add, t_rm = mods[0][2], mods[1][2]
t_created = [e["time_ns"] for e in ev if e["kind"] == "snapshot-created"][1]
print("delay from fake_b's load to its snapshot: %d ms" % ((t_created - t_add) // 10**6), file=sys.stderr)
if t_created - t_add < 300 * 10**6:
    sys.exit(1)
print(t_add, t_rm, ids[s1], ids[s2])
EOF
read -r T_ADD T_RM ID1 ID2 < "$T/times"
pass "events: snapshot-created $SNAP1, snapshot-created $SNAP2 >= 300 ms after fake_b's load, snapshot-reused $SNAP1"

# ---- 3. samples link to the snapshot of their layout ----
if ! command -v sqlite3 >/dev/null; then
        echo "SKIP (part 3): sqlite3 is not installed: samples' snapshot links not checked"
else
        c0=$(st commits)
        for _ in $(seq 1 100); do [ "$(st commits)" -ge $((c0 + 2)) ] && break; sleep 0.1; done
        q() { sqlite3 -readonly "$DB" "$1"; }
        # Per bucket (a second): buckets wholly inside fake_b's time link
        # only to its snapshot, buckets wholly outside only to the other;
        # a bucket that spans a change may hold both.
        "$SAMPLE_DUMP" "$DB" > "$T/entries" || fail "sample-dump failed"
        read -r n linked during outside <<< "$(python3 - "$T/entries" "$T_ADD" "$T_RM" <<'PY'
import sys
a, b = int(sys.argv[2]), int(sys.argv[3])
n = linked = 0
inside, outside = {}, {}
for line in open(sys.argv[1]):
    start, end, snap, count = (int(x) for x in (line.split()[i] for i in (0, 1, 9, 11)))
    n += count
    linked += count if snap > 0 else 0
    if start >= a and end <= b:
        inside[snap] = inside.get(snap, 0) + count
    elif end <= a or start >= b:
        outside[snap] = outside.get(snap, 0) + count
fmt = lambda d: ",".join("%d:%d" % kv for kv in sorted(d.items())) or "-"
print(n, linked, fmt(inside), fmt(outside))
PY
)"
        [ "$n" -gt 0 ] && [ "$n" = "$linked" ] || fail "samples: $n stored, $linked with a snapshot"
        echo "samples by snapshot in buckets while fake_b was loaded: $during; otherwise: $outside (ids $ID1, $ID2)"
        [[ "$during" =~ ^$ID2:[0-9]+$ ]] || fail "samples taken while fake_b was loaded link to $during, expected only snapshot $ID2"
        [[ "$outside" =~ ^$ID1:[0-9]+$ ]] || fail "samples taken without fake_b link to $outside, expected only snapshot $ID1"
        paths=$(q "SELECT path FROM snapshots WHERE id IN ($ID1, $ID2) ORDER BY id" | tr '\n' ' ')
        [ "$paths" = "$SNAP1 $SNAP2 " ] || fail "the snapshots table has paths $paths for ids $ID1, $ID2"
        pass "all $n samples link to a snapshot: $during while fake_b was loaded, $outside otherwise"
fi

# ---- 5. no sample lost while 48 MiB copies are made ----
[ "$(st frequency_hz)" = 99 ] || fail "frequency_hz is $(st frequency_hz), expected the default 99"
lost0=$(st lost); stored0=$(st stored_samples)
SNAPS5=()
for i in 1 2 3 4 5; do
        # A module line the cache has not seen: nothing to reuse.
        modules_file "fake_c 8192 0 - Live 0xffffffffc0d${i}0000" "fake_a 16384 0 - Live 0xffffffffc0a00000"
        # Snapshots so far: the request's must be the only one in between
        # for status to give its duration (a sample at an address of no
        # known module, such as another test's BPF program, makes the
        # daemon read the modules again, and snapshot their change).
        SNAPS='d["snapshots_created"] + d["snapshots_reused"] + d["snapshot_failures"]'
        read -r smp0 n0 <<< "$(json status | field '"%d %d" % (d["samples"], '"$SNAPS"')')"
        json snapshot > "$T/s$i.json" || fail "snapshot request $i failed: $(cat "$T/s$i.json")"
        sleep 0.3
        read -r res path dur kb seg <<< "$(field '"%s %s %d %d %d" % (d["result"], d["path"], d["duration_ns"], d["kcore_bytes"], d["kcore_segments"])' < "$T/s$i.json")"
        read -r smp1 lost last n1 <<< "$(json status | field '"%d %d %d %d" % (d["samples"], d["lost"], d["snapshot_last_duration_ns"], '"$SNAPS"')')"
        echo "snapshot $i: $res in $((dur / 1000000)) ms (status: $((last / 1000000)) ms), kcore $kb bytes in $seg segments; samples $smp0 -> $smp1, lost $lost; snapshots $n0 -> $n1"
        [ "$res" = created ] || fail "snapshot request $i: $res, expected created (modules changed)"
        if [ "$n1" = $((n0 + 1)) ]; then
                [ "$last" = "$dur" ] || fail "snapshot_last_duration_ns $last differs from the reply's duration_ns $dur"
        else
                echo "  (another snapshot in between: status's last duration is not this one's)"
        fi
        [ "$kb" -ge $((48 << 20)) ] || fail "snapshot $i copied $kb kcore bytes, expected at least 48 MiB"
        [ "$smp1" -gt "$smp0" ] || fail "no sample ingested while snapshot $i was taken: samples $smp0 -> $smp1"
        SNAPS5+=("$path")
done
lost=$(st lost); stored=$(st stored_samples); perlost=$(json status | field 'd["lost_per_cpu"]')
[ "$lost" = "$lost0" ] || fail "samples lost during the snapshots: lost $lost0 -> $lost (per CPU $perlost)"
[ "$stored" -gt "$stored0" ] || fail "stored_samples did not grow during the snapshots: $stored0 -> $stored"
pass "5 snapshots of 48 MiB, lost $lost0 -> $lost (per CPU $perlost), stored_samples $stored0 -> $stored"
# Since start-up: no record lost while any snapshot was copied, from the
# time it is named after (when it began) to its journal entry (when it was
# done). Losses at other times (a loaded host) are shown, not judged here.
if command -v sqlite3 >/dev/null; then
        c0=$(st commits)
        for _ in $(seq 1 100); do [ "$(st commits)" -ge $((c0 + 2)) ] && break; sleep 0.1; done
        sqlite3 -readonly -separator ' ' "$DB" "SELECT 'copy', s.time_ns, e.time_ns FROM snapshots s JOIN events e ON e.snapshot = s.id AND e.kind = 'snapshot-created'; SELECT 'lost', time_ns, cpu, count FROM lost" > "$T/lost.txt"
        python3 - "$T/lost.txt" <<'EOF2' || fail "records were lost while snapshots were copied (see above)"
import sys
rows = [l.split() for l in open(sys.argv[1])]
copies = [(int(r[1]), int(r[2])) for r in rows if r[0] == "copy"]
lost = [(int(r[1]), int(r[2]), int(r[3])) for r in rows if r[0] == "lost"]
during = [l for l in lost if any(a <= l[0] <= b for a, b in copies)]
print("%d copies from %.0f to %.0f ms long; lost records: %d during copies, %d (%d samples) at other times" % (
      len(copies), min(b - a for a, b in copies) / 1e6, max(b - a for a, b in copies) / 1e6,
      len(during), len(lost) - len(during), sum(l[2] for l in lost if l not in during)))
for t, cpu, n in lost:
    print("  lost %d on CPU %d at %d%s" % (n, cpu, t, " (during a copy)" if (t, cpu, n) in during else ""))
sys.exit(1 if during else 0)
EOF2
        pass "no record lost while any of the snapshots so far was copied"
fi

# ---- 4. snapshot reuses; prune keeps the newest and the current one ----
modules_file "fake_a 16384 0 - Live 0xffffffffc0a00000"
json snapshot > "$T/s.json" || fail "snapshot request failed: $(cat "$T/s.json")"
read -r res path <<< "$(field '"%s %s" % (d["result"], d["path"])' < "$T/s.json")"
cur=$(st snapshot_current)
[ "$res" = reused ] && [ "$path" = "$SNAP1" ] && [ "$cur" = "$SNAP1" ] ||
        fail "perfsnapctl snapshot with fake_a only: $res $path, current $cur (expected reused $SNAP1)"
pass "perfsnapctl snapshot: reused $path, the current one"

# Group members may list, not prune nor snapshot; others may not list.
as_member() { setpriv --reuid=65534 --regid=65534 --groups="$GID" -- "$@"; }
out=$(as_member "$CTL" cache prune --max-size 1 2>&1); rc=$?
echo "$out"
[ $rc = 1 ] && echo "$out" | grep -q "only root may prune the cache" || fail "a group member's cache prune: exit $rc: $out"
out=$(as_member "$CTL" snapshot 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "only root may request a snapshot" || fail "a group member's snapshot: exit $rc: $out"
n=$(as_member "$CTL" cache list --format json | field 'len(d["snapshots"])')
[ "$n" = 7 ] || fail "a group member's cache list shows $n snapshots, expected 7"
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups -- "$CTL" cache list 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "$GROUP" || fail "a non-member's cache list: exit $rc: $out"
pass "cache prune and snapshot refused to a group member, cache list not; refused to others"

[ "$(snapdirs | wc -l)" = 7 ] || fail "before pruning the cache holds $(snapdirs | wc -l) snapshots, expected 7"
out=$("$CTL" cache prune --max-size 1) || fail "cache prune failed: $out"
echo "$out"
got=$(echo "$out" | sed -n 's/^removed \(.*\) ([^)]*)$/\1/p' | sort | tr '\n' ' ')
want=$(printf '%s\n' "$SNAP2" "${SNAPS5[@]:0:4}" | sort | tr '\n' ' ')
[ "$got" = "$want" ] || fail "cache prune removed: $got; expected: $want"
echo "$out" | grep -q "^2 snapshots left" || fail "cache prune does not say 2 snapshots left: $out"
left=$(snapdirs | tr '\n' ' ')
[ "$left" = "$SNAP1 ${SNAPS5[4]} " ] || fail "after pruning the cache holds $left, expected $SNAP1 ${SNAPS5[4]}"
[ "$(st snapshots_pruned)" = 5 ] || fail "snapshots_pruned is $(st snapshots_pruned), expected 5"
pass "cache prune --max-size 1 removed 5, kept the current $SNAP1 and the newest"

# ---- 6. a kcore that is not ELF ----
fail0=$(st snapshot_failures)
yes "this is not an ELF file" | head -c 1048576 > "$R/proc/kcore"
mkmod fake_d ffffffffc0e00000
modules_file "fake_d 8192 0 - Live 0xffffffffc0e00000" "fake_a 16384 0 - Live 0xffffffffc0a00000"
"$CTL" rescan > /dev/null || fail "rescan failed"
wait_status "d['snapshot_failures'] > $fail0" || fail "snapshot_failures stayed $(st snapshot_failures) with a garbage kcore"
grep "Failed to snapshot" "$T/daemon.log" || fail "no log line about the failed snapshot"
out=$("$CTL" snapshot 2>&1); rc=$?
echo "perfsnapctl snapshot: exit $rc: $out"
[ $rc = 1 ] || fail "perfsnapctl snapshot with a garbage kcore: exit $rc, expected 1: $out"
fails=$(st snapshot_failures); lasterr=$(st snapshot_last_error)
[ "$fails" = $((fail0 + 2)) ] || fail "snapshot_failures $fail0 -> $fails, expected +2"
echo "$out" | grep -qi "kcore" ||
        soft_fail "the error of perfsnapctl snapshot does not name kcore: '$out' (status snapshot_last_error: $lasterr)"
grep "Failed to snapshot" "$T/daemon.log" | grep -qi "kcore" ||
        soft_fail "the daemon's log line does not name kcore: $(grep "Failed to snapshot" "$T/daemon.log" | tail -1)"
kill -0 "$DPID" || fail "perfsnapd died"
json cache list > "$T/l6.json" || fail "cache list failed after the failed snapshot"
n=$(field 'len(d["snapshots"])' < "$T/l6.json")
[ "$n" = 2 ] && [ "$(snapdirs | tr '\n' ' ')" = "$SNAP1 ${SNAPS5[4]} " ] ||
        fail "after the failures: cache list shows $n, directories $(snapdirs | tr '\n' ' ')"
[ -z "$(ls -A "$CACHE/.tmp")" ] || fail "$CACHE/.tmp holds $(ls -A "$CACHE/.tmp")"
extra=$(ls -A "$CACHE/[kernel.kcore]/$BUILD_ID" | wc -l)
[ "$extra" = 2 ] || fail "$CACHE/[kernel.kcore]/$BUILD_ID has $extra entries, expected 2"
pass "garbage kcore: failures $fail0 -> $fails, snapshot exits 1 ($out), daemon answers, nothing half-made in the cache"

# ---- 8. kill -9 during a copy ----
# The copy of 48 MiB takes tens of ms here; a poller that is not scheduled
# at the right moment misses it. Then the snapshot is done: the next try
# moves fake_d, so that the layout is new and is copied again.
cp "$T/kcore.good" "$R/proc/kcore"
python3 - "$CTL" "$CACHE/.tmp" "$DPID" "$R/proc/modules" "$T/missed" <<'EOF' || fail "could not kill perfsnapd during a copy (see above)"
import glob, os, signal, subprocess, sys, time
ctl, tmp, pid, modules, missed = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
for attempt in range(10):
    with open(modules, "w") as f:
        f.write("fake_d 8192 0 - Live 0x%x\nfake_a 16384 0 - Live 0xffffffffc0a00000\n"
                % (0xffffffffc0e00000 + attempt * 0x10000))
    p = subprocess.Popen([ctl, "snapshot"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 20
    while p.poll() is None and time.monotonic() < end:
        k = glob.glob(tmp + "/snapshot-*/kcore")
        try:
            size = os.path.getsize(k[0]) if k else 0
        except OSError:         # renamed into place since the glob
            size = 0
        # Well into the copy: past the headers and the first MiB of text.
        if size > 1 << 20:
            os.kill(pid, signal.SIGKILL)
            print("try %d: killed perfsnapd with %s at %d bytes" % (attempt + 1, k[0], size))
            open(missed, "w").write("%d\n" % attempt)
            p.wait()
            sys.exit(0)
    p.wait()
    print("try %d: the copy was done before it was seen past 1 MiB (snapshot exit %d)" % (attempt + 1, p.returncode))
sys.exit(1)
EOF
wait "$DPID" 2>/dev/null
DPID=
ntmp=$(ls -A "$CACHE/.tmp" | wc -l)
[ "$ntmp" -ge 1 ] || fail "after kill -9 during a copy, $CACHE/.tmp is empty: the test missed the copy"
check_log
start_daemon
wait_status "d['snapshots_created'] + d['snapshots_reused'] >= 1" || fail "no start-up snapshot after the restart"
grep "Removed $ntmp unfinished snapshots" "$T/daemon.log" || fail "no 'Removed $ntmp unfinished snapshots' in the log"
[ -z "$(ls -A "$CACHE/.tmp")" ] || fail "$CACHE/.tmp holds $(ls -A "$CACHE/.tmp") after the restart"
json cache list > "$T/l8.json"
missed=$(cat "$T/missed")
python3 - "$T/l8.json" "$missed" <<'EOF' || fail "the cache after the restart is wrong (see above)"
import json, os, sys
s = json.load(open(sys.argv[1]))["snapshots"]
print("cache list:", [(x["name"], x["modules"], x["kcore"], x["size"]) for x in s])
# Two from before, the restart's, and one for each copy the kill missed.
ok = len(s) == 3 + int(sys.argv[2])
for x in s:
    files = sorted(os.listdir(x["path"]))
    ok = ok and files == ["kallsyms", "kcore", "modules"] and x["kcore"] and x["size"] > 48 << 20
sys.exit(0 if ok else 1)
EOF
pass "kill -9 during a copy: $ntmp unfinished snapshot removed at restart, the cache lists $((3 + missed)) complete ones ($missed copies missed)"

# ---- 7. root = / on this host ----
stop_daemon
[ "$DRC" = 0 ] || fail "perfsnapd exited with $DRC"
check_log
if [ -e /proc/kcore ]; then
        echo "SKIP (part 7): this host has /proc/kcore"
else
        sed -i -e '/^root = /d' -e "s|^database = .*|database = $T/host.db|" -e "s|^cache_dir = .*|cache_dir = $T/hostcache|" "$CONF"
        CACHE=$T/hostcache
        start_daemon
        wait_status "d['snapshots_created'] >= 1" || fail "no start-up snapshot with root = /"
        kerr=$(st snapshot_kcore_error)
        [ "$kerr" = "No such file or directory" ] || fail "snapshot_kcore_error is '$kerr', expected 'No such file or directory'"
        read -r n kc <<< "$(json cache list | field '"%d %s" % (len(d["snapshots"]), d["snapshots"][0]["kcore"])')"
        [ "$n" = 1 ] && [ "$kc" = False ] || fail "cache list with root = /: $n snapshots, kcore $kc (expected 1, false)"
        files=$(ls "$(snapdirs)" | tr '\n' ' ')
        [ "$files" = "kallsyms modules " ] || fail "the snapshot without kcore holds: $files"
        grep "cannot read /proc/kcore: No such file or directory" "$T/daemon.log" || fail "no log line saying /proc/kcore is missing"
        pass "root = /: snapshot without kcore ($kerr), cache list says kcore false"
        stop_daemon
        [ "$DRC" = 0 ] || fail "perfsnapd exited with $DRC"
        check_log
fi
[ $FAILED = 0 ] || { echo "FAIL: some checks failed (see above)"; exit 1; }
