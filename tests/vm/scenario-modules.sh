#!/bin/sh
# Runs inside the VM (systemd is PID 1, Debian's kernel, real modules).
# Module tracking end to end: brd is loaded, burnt and unloaded twice while
# perfsnapd runs with a long drain_interval, so the samples taken in brd
# are still in the ring buffers when its remove uevent arrives. Checks that
# they resolve to [brd] symbols of the instance loaded at their time, that
# `perfsnapctl modules` and `events` match what sysfs and /proc/modules
# said at each load, and the add/remove -> journaled latency. Prints one
# "PASS: ..." or "FAIL: ..." line per check.
# Environment: BUILD_DIR (the host's meson build directory, visible at the
# same path through the 9p root).
set -u
failed=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=1; }
check() { desc=$1; shift; if "$@"; then pass "$desc"; else fail "$desc"; fi; }

D=/tmp/mods
mkdir -p $D
BURN_S=3

now_ns() { date +%s%N; }
# perfsnapctl's time syntax for an epoch time in ns: @SECONDS.NANOSECONDS
at() { printf '@%d.%09d' $(($1 / 1000000000)) $(($1 % 1000000000)); }
T0=$(now_ns)
# Progress with the time since the start, to see where a slow step went.
step() { echo "[$(( ($(now_ns) - T0) / 1000000 )) ms] $*"; }
# An integer member of the status (one per line in the pretty JSON).
status_field() { perfsnapctl status --format json | sed -n "s/^ *\"$1\": *\([0-9]*\).*/\1/p"; }

# Waits until status field $1 reaches $2 (the tracker handled the uevent
# and committed the journal entry); prints the wait.
wait_status() {
        t0=$(now_ns)
        for _ in $(seq 1 100); do
                v=$(status_field "$1")
                [ "${v:-0}" -ge "$2" ] && { echo "  $1=$v after $(( ($(now_ns) - t0) / 1000000 )) ms"; return 0; }
                sleep 0.1
        done
        echo "  $1 stayed at $v, expected $2"
        return 1
}

# Every module's section map, as "/sys/module/NAME/sections/SECTION:ADDR".
all_sections() {
        grep -r . /sys/module/*/sections/ 2>/dev/null
}

rmmod_brd() {
        # udev may still hold /dev/ram0 open for a moment (blkid after a
        # close-for-write); a busy module refuses to go.
        for _ in $(seq 1 100); do
                rmmod brd 2>$D/rmmod.err && return 0
                sleep 0.05
        done
        cat $D/rmmod.err
        return 1
}

# Direct reads of /dev/ram0 run brd_submit_bio in dd's context, once per
# 4 KiB: little else than brd's code, the bio and the syscall.
read_ram0() {
        if [ "$DIRECT" = 1 ]; then
                dd if=/dev/ram0 of=/dev/null bs=4k count=4096 iflag=direct 2>/dev/null
        else
                echo 3 > /proc/sys/vm/drop_caches
                dd if=/dev/ram0 of=/dev/null bs=4k count=4096 2>/dev/null
        fi
}

# One load, burn and unload of brd; files $D/<i>.* record what was seen.
cycle() {
        i=$1
        # A fresh 60 s before the next drain for each instance: a reload
        # re-arms the drain timer when drain_interval changes. Otherwise a
        # slow guest could reach the first timer in the second cycle.
        sed -i "s/^drain_interval = .*/drain_interval = $((58 + i))s/" "$conf"
        systemctl reload perfsnapd
        added=$(status_field modules_added)
        removed=$(status_field modules_removed)
        step "--- brd instance $i"
        now_ns > $D/$i.modprobe_start
        modprobe brd rd_nr=16 rd_size=65536 || { fail "modprobe brd ($i)"; return 1; }
        now_ns > $D/$i.modprobe_end
        cp /proc/modules $D/$i.procmodules
        all_sections > $D/$i.sections
        echo "  /proc/modules: $(grep '^brd ' $D/$i.procmodules)"
        echo "  brd's sections (sysfs):"
        sed -n 's|^/sys/module/brd/sections/\(.*\):\(.*\)|    \1 \2|p' $D/$i.sections
        check "instance $i: the add is tracked (modules_added $added -> $((added + 1)))" wait_status modules_added $((added + 1))
        echo "  last_change_ns after the add: $(status_field last_change_ns)" | tee $D/$i.add_change
        udevadm settle -t 10 2>/dev/null
        step "udev settled; burning"

        now_ns > $D/$i.burn_start
        dd if=/dev/zero of=/dev/ram0 bs=1M count=64 oflag=direct 2>$D/dd.err || cat $D/dd.err
        if [ -z "${DIRECT:-}" ]; then
                DIRECT=1
                dd if=/dev/ram0 of=/dev/null bs=4k count=1 iflag=direct 2>$D/dd.err || { cat $D/dd.err; DIRECT=0; }
                echo "  dd iflag=direct on /dev/ram0: $([ $DIRECT = 1 ] && echo works || echo fails, using drop_caches)"
        fi
        end=$(( $(now_ns) + BURN_S * 1000000000 ))
        n=0
        while [ "$(now_ns)" -lt $end ]; do
                read_ram0 || { fail "reading /dev/ram0 ($i)"; break; }
                n=$((n + 1))
        done
        now_ns > $D/$i.burn_end
        rmmod_brd || { fail "rmmod brd ($i)"; return 1; }
        now_ns > $D/$i.rmmod_end
        ms=$(( ($(cat $D/$i.burn_end) - $(cat $D/$i.burn_start)) / 1000000 ))
        echo "  burn: 64 MiB written, $n x 16 MiB read in $ms ms; rmmod $(( ($(cat $D/$i.rmmod_end) - $(cat $D/$i.burn_end)) / 1000000 )) ms after the burn"
        step "rmmod done"
        check "instance $i: the remove is tracked (modules_removed $removed -> $((removed + 1)))" wait_status modules_removed $((removed + 1))
        echo "  last_change_ns after the remove: $(status_field last_change_ns)" | tee $D/$i.remove_change
        # What was stored by the time the remove was journaled: the burn's
        # samples must not be there yet. From status, which does not drain
        # (a query drains the ring buffers first).
        echo "  samples stored so far: $(status_field samples)"
        status_field newest_sample_ns > $D/$i.early_newest
}

echo "kernel $(uname -r), $(nproc) CPUs, PID 1 is $(ps -o comm= -p 1)"
# A yardstick for the latencies below: software emulation is slow.
t=$(now_ns); awk 'BEGIN { for (i = 0; i < 3000000; i++) s += i }'
echo "speed reference: an awk loop of 3e6 iterations takes $(( ($(now_ns) - t) / 1000000 )) ms"

meson install -C "$BUILD_DIR" --no-rebuild --quiet > $D/install.log 2>&1 \
        || { cat $D/install.log; fail "meson install"; exit 1; }
systemd-sysusers >/dev/null 2>&1
# Not the host's database or snapshots, visible through the overlay's
# lower layer when perfsnapd has run on the host (whited out here only).
rm -rf /var/lib/perfsnapd /var/cache/perfsnapd

# Nothing is drained until both instances are gone: drain_interval is
# the longest allowed (60s), and the kernel's wake-up (a buffer half
# full) needs 32 MiB per CPU, more than a minute at 999 Hz. Then a reload
# with a short drain_interval drains everything at once, after both remove
# uevents. 64 MiB per CPU exceeds the default RLIMIT_MEMLOCK that perf
# charges beyond perf_event_mlock_kb: a drop-in raises it.
mkdir -p /etc/systemd/system/perfsnapd.service.d
printf '[Service]\nLimitMEMLOCK=256M\n' > /etc/systemd/system/perfsnapd.service.d/memlock.conf
systemctl daemon-reload
conf=$(systemctl show -p ExecStart --value perfsnapd | sed -n 's/.*--config \([^ ;]*\).*/\1/p')
sed -i -e 's/^frequency_hz = .*/frequency_hz = 999/' \
       -e 's/^drain_interval = .*/drain_interval = 60s/' \
       -e 's/^ring_buffer_pages = .*/ring_buffer_pages = 16384/' "$conf"
echo "$conf:"
perfsnapd --check-config --config "$conf" | grep -E '^(frequency_hz|drain_interval|ring_buffer_pages|commit_interval)'
check "brd is not loaded before the test" sh -c '! grep -q "^brd " /proc/modules'

# Type=notify: start returns once the daemon is sampling.
if ! systemctl start perfsnapd || [ "$(systemctl is-active perfsnapd)" != active ]; then
        fail "systemctl start perfsnapd: not active ($(systemctl is-active perfsnapd))"
        journalctl -u perfsnapd --no-pager | tail -15
        exit 1
fi
pass "systemctl start perfsnapd: active"
sleep 1
f=$(status_field frequency_hz)
check "the service samples at 999 Hz ($f)" [ "$f" = 999 ]
echo "max_change_ns right after start-up, before any module came or went: $(status_field max_change_ns)"

cycle 1
cycle 2

step "draining: drain_interval = 1s, reload"
sed -i 's/^drain_interval = .*/drain_interval = 1s/' "$conf"
systemctl reload perfsnapd
# One drain takes everything; its batch is committed whole.
n=0
for _ in $(seq 1 120); do
        n=$(perfsnapctl query --since "$(at "$(cat $D/2.burn_start)")" --until "$(at "$(cat $D/2.burn_end)")" \
                --format json | sed -n 's/^ *"total": *\([0-9]*\).*/\1/p')
        [ "${n:-0}" -gt 0 ] && break
        sleep 0.5
done
check "the reload's first drain stored the burns' samples (${n:-0} of instance 2's burn)" [ "${n:-0}" -gt 0 ]
step "drained; $(status_field samples) samples stored"

for i in 1 2; do
        # The whole life of the instance: modprobe (its init), the burn,
        # rmmod (its exit).
        perfsnapctl query --since "$(at "$(cat $D/$i.modprobe_start)")" --until "$(at "$(cat $D/$i.rmmod_end)")" \
                --format folded > $D/$i.life.folded
        since=$(at "$(cat $D/$i.burn_start)"); until=$(at "$(cat $D/$i.burn_end)")
        perfsnapctl query --since "$since" --until "$until" --format folded > $D/$i.folded
        perfsnapctl query --since "$since" --until "$until" --format json > $D/$i.json
        echo "--- query of burn window $i ($since .. $until), all commands"
        perfsnapctl query --since "$since" --until "$until" --top 15
        echo "--- its 5 biggest dd stacks"
        grep '^dd;' $D/$i.folded | awk '{ print $NF "\t" $0 }' | sort -nr 2>/dev/null | head -5 | cut -f2 \
                | sed -E 's/^(.{40}).{20,}(.{240})$/\1 ... \2/'
done
perfsnapctl query --since 30m --format folded > $D/all.folded
perfsnapctl modules --sections --format json > $D/modules.json
perfsnapctl events --format json > $D/events.json
perfsnapctl status --format json > $D/status.json
cp /proc/modules $D/proc_modules
echo "--- perfsnapctl modules --sections (brd)"
perfsnapctl modules --sections | awk '/^brd / { p = 1; print; next } /^[^ ]/ { p = 0 } p'
echo "--- perfsnapctl events"
perfsnapctl events | grep -v '^ '

rescan=$(perfsnapctl rescan 2>&1); rc=$?
echo "$rescan"
nmod=$(wc -l < /proc/modules)
check "rescan as root: rc 0, nothing added or removed, $nmod loaded ($rescan)" \
        sh -c "[ $rc = 0 ] && echo \"\$0\" | grep -q 'Rescanned: 0 added, 0 removed, $nmod modules loaded'" "$rescan"

echo "--- perfsnapd journal (module lines)"
journalctl -u perfsnapd --no-pager -o short-precise | grep -iE 'module|uevent|rescan|warn|error|fail' | tail -20

python3 - "$D" <<'PY' || failed=1
import json, os, re, sys

D = sys.argv[1]
ok = True
def check(cond, desc):
    global ok
    print(("PASS: " if cond else "FAIL: ") + desc)
    ok = ok and bool(cond)

def rd(name):
    with open(os.path.join(D, name)) as f:
        return f.read()
def ns(name):
    return int(rd(name).strip())
def js(name):
    return json.loads(rd(name))

def folded(name):
    stacks = []
    for line in rd(name).splitlines():
        head, _, count = line.rpartition(" ")
        if not head:
            continue
        parts = head.split(";")
        stacks.append((parts[0], parts[1:], int(count)))
    return stacks

BRD_FUNC = re.compile(r"^brd_|_brd$")
def brd_samples(stacks, comm=None):
    return sum(c for (cm, frames, c) in stacks
               if (comm is None or cm == comm) and any(BRD_FUNC.search(f) for f in frames))

inst = {}
for i in (1, 2):
    procmods = {l.split()[0]: l.split() for l in rd(f"{i}.procmodules").splitlines()}
    proc = procmods["brd"]
    secs = {}               # module -> section -> address, as sysfs showed right after the load
    for line in rd(f"{i}.sections").splitlines():
        m = re.match(r"^/sys/module/([^/]+)/sections/([^:]+):(0x[0-9a-f]+)$", line)
        if m:
            secs.setdefault(m.group(1), {})[m.group(2)] = int(m.group(3), 16)
    base, size = int(proc[5], 16), int(proc[1])
    inst[i] = dict(base=base, size=size, sections=secs.get("brd", {}),
                   nsec_all=sum(len(secs.get(name, {})) for name in procmods))
    print(f"load {i}: brd at {base:#x}, {size} bytes, {len(inst[i]['sections'])} sections; "
          f"{inst[i]['nsec_all']} sections of the {len(procmods)} modules in /proc/modules")
    for name, ss in sorted(secs.items()):
        for sec, a in sorted(ss.items()):
            if name != "brd" and base <= a < base + size:
                print(f"  note: {name} {sec} at {a:#x} lies inside brd's core (freed init memory, reused)")
print("instance bases: " + ", ".join(f"{i}: {v['base']:#x} ({v['size']} bytes)" for i, v in inst.items()) +
      ("; the same address both times" if inst[1]["base"] == inst[2]["base"] else "; different addresses"))

# A frame named after a section that holds no code (".strtab", ".rodata",
# ".init.data", ...) means an address was given to the wrong module: an
# instruction pointer is never there.
def data_section(f):
    return f.startswith(".") and "text" not in f

def count(d, k, c):
    d[k] = d.get(k, 0) + c

# The frame a kernel function called into: the module's function.
def callees(stacks, comm, caller):
    found = {}
    for (cm, frames, c) in stacks:
        if cm == comm and caller in frames:
            k = frames.index(caller)
            if k + 1 < len(frames):
                count(found, frames[k + 1], c)
    return found

for i in (1, 2):
    lo, hi = inst[i]["base"], inst[i]["base"] + inst[i]["size"]
    early_newest = int(rd(f"{i}.early_newest").strip() or 0)
    q = js(f"{i}.json")["result"]
    rows = q.get("rows", [])
    stacks = folded(f"{i}.folded")
    life = folded(f"{i}.life.folded")
    dd_kernel = sum(r["samples"] for r in rows if r["comm"] == "dd" and r["kernel"])
    dd_total = sum(r["samples"] for r in rows if r["comm"] == "dd")
    in_brd = brd_samples(stacks, "dd")
    leaf_brd = [r for r in rows if r["module"] == "[brd]"]
    leaf_brd_n = sum(r["samples"] for r in leaf_brd)
    print(f"window {i}: {q['total']} samples, lost {q['lost']}; dd {dd_total}, of which kernel {dd_kernel}; "
          f"dd stacks through brd: {in_brd}; leaf in [brd]: {leaf_brd_n} "
          f"({', '.join(sorted({r['symbol'] for r in leaf_brd}))})")
    check(early_newest < ns(f"{i}.burn_start") and q["total"] > 0,
          f"window {i}: its samples were still in the ring buffers when the remove was journaled "
          f"(the newest stored then {(early_newest - ns(f'{i}.burn_start')) / 1e9:+.3f} s from the burn's start; "
          f"{q['total']} after the drain)")
    check(q["lost"] == 0, f"window {i}: no samples lost (lost {q['lost']})")
    check(in_brd >= 20, f"window {i}: dd's samples go through brd_* functions ({in_brd}, need >= 20; "
          f"{100 * in_brd // max(dd_kernel, 1)}% of dd's {dd_kernel} kernel samples)")
    check(leaf_brd_n > 0 and all(not r["symbol"].startswith("0x") for r in leaf_brd),
          f"window {i}: leaf frames in module [brd] ({leaf_brd_n} samples) all carry symbols")
    other = sorted({(r["module"], r["symbol"]) for r in rows if r["comm"] == "dd" and r["kernel"]
                    and r["module"] not in ("[kernel.kallsyms]", "[brd]")})
    if other:
        print(f"window {i}: dd's leaf frames in other modules: {other[:12]}")

    # No module's init or exit code runs during the burn; data is no code.
    wrong = {}
    for (cm, frames, c) in stacks:
        for f in set(frames):
            if f in ("init_module", "cleanup_module") or data_section(f):
                count(wrong, f"{cm}:{f}", c)
    check(not wrong, f"window {i}: no frame in an init/exit function or a data section ({wrong})")
    wrong = {}
    for (cm, frames, c) in life:
        for f in set(frames):
            if data_section(f):
                count(wrong, f"{cm}:{f}", c)
    check(not wrong, f"instance {i}, modprobe to rmmod: no frame named after a data section ({wrong})")

    # The rule for an address in brd's range: a function of brd, or, in a
    # data section, "SECTION+0xOFFSET" at an address sysfs gave that
    # section; never a bare hex address. This used to fail about one run
    # in four on a single frame at the start of brd's .orc_unwind: a user
    # frame of perfsnapd itself. The kernel walks user stacks by frame
    # pointers and reports whatever lies beside each one; perfsnapd had
    # just parsed brd's sysfs section addresses. perfsnapd now drops such
    # entries (status invalid_user_frames), tests/integration/
    # test-user-chain.sh makes them on purpose.
    secs = inst[i]["sections"]
    hex_in_brd, data_frames, bad_data = {}, {}, {}
    for (cm, frames, c) in life:
        for f in frames:
            if re.fullmatch(r"0x[0-9a-f]+", f) and lo <= int(f, 16) < hi:
                count(hex_in_brd, f"{cm}:{f}", c)
            m = re.fullmatch(r"(\.?[A-Za-z0-9_.]+)\+0x([0-9a-f]+)", f)
            if m and m.group(1) in secs and "text" not in m.group(1):
                a = secs[m.group(1)] + int(m.group(2), 16)
                count(data_frames if lo <= a < hi else bad_data, f"{cm}:{f}", c)
    if data_frames:
        print(f"instance {i}: frames in brd's data sections: {data_frames}")
    check(not hex_in_brd and not bad_data,
          f"instance {i}, modprobe to rmmod: every frame in brd's range {lo:#x}..{hi:#x} is named, by function "
          f"or as section+offset ({len(data_frames)} such); bare hex: {sorted(hex_in_brd)[:8]}, "
          f"section+offset outside brd: {sorted(bad_data)[:8]}")

    # rmmod runs brd's exit function (brd_exit, alias cleanup_module),
    # modprobe its init function (brd_init, alias init_module).
    # __do_sys_delete_module also calls core functions (free_module, ...);
    # what is not core must be brd's exit code, never hex or data.
    ex = callees(life, "rmmod", "__do_sys_delete_module")
    ex_brd = sum(c for f, c in ex.items() if re.match(r"^(brd_|cleanup_module$)", f))
    bad = sorted(f for f in ex if re.fullmatch(r"0x[0-9a-f]+", f) or data_section(f) or f == "init_module")
    check(ex_brd > 0 and not bad,
          f"instance {i}: rmmod's samples in the module's exit function name brd's ({ex}; brd's: {ex_brd}, wrong: {bad})")
    # Its init runs before the kernel sends "add" (rd_nr=16: sixteen disks
    # to set up, enough to be sampled): those samples must resolve too.
    # do_one_initcall() also calls core functions: after the init function
    # returns, add_latent_entropy() -> add_device_randomness() (seen once,
    # 1 sample of 13, CI at 44402a6). As for the exit function: what is not
    # core must be brd's init code, never hex or data.
    ini = callees(life, "modprobe", "do_one_initcall")
    ini_brd = sum(c for f, c in ini.items() if re.match(r"^(brd_|init_module$)", f))
    bad = sorted(f for f in ini if re.fullmatch(r"0x[0-9a-f]+", f) or data_section(f) or f == "cleanup_module")
    check(ini_brd > 0 and not bad,
          f"instance {i}: modprobe's samples in the module's init function, taken before its add uevent, "
          f"name brd's ({ini or 'none sampled'}; brd's: {ini_brd}, wrong: {bad})")

# Every sample since the start, from the first drain on: the modules that
# were loaded before perfsnapd started own their core layout for all of it,
# also before the start-up scan read proc/modules (sysfs still lists the
# init sections those modules freed long ago, where other modules sit now:
# they once made half of these windows start at the scan).
cores = []
for line in rd("proc_modules").splitlines():
    f = line.split()
    if f[0] != "brd":
        cores.append((f[0], int(f[5], 16), int(f[1])))
hex_in_core = {}
for (cm, frames, c) in folded("all.folded"):
    for f in frames:
        if re.fullmatch(r"0x[0-9a-f]+", f):
            a = int(f, 16)
            for (name, b, sz) in cores:
                if b <= a < b + sz:
                    count(hex_in_core, f"{cm}:{name}:{f}", c)
check(not hex_in_core, f"whole run: no bare hex frame in the core layout of the {len(cores)} other loaded modules "
      f"({sum(hex_in_core.values())} samples: {sorted(hex_in_core)[:8]})")

# perfsnapctl modules --sections
mods = [m for m in js("modules.json").get("modules", []) if m.get("name") == "brd"]
check(len(mods) == 2, f"modules: two brd instances ({len(mods)})")
for i, m in zip((1, 2), mods):
    want = inst[i]
    base = int(m["base"], 16)
    check(base == want["base"] and m["size"] == want["size"],
          f"modules: instance {i} base {m['base']} size {m['size']} as in /proc/modules ({want['base']:#x} {want['size']})")
    lo_ns, hi_ns = ns(f"{i}.modprobe_start"), ns(f"{i}.modprobe_end") + 2 * 10**9
    check(lo_ns <= m["loaded_ns"] <= hi_ns and m.get("loaded_how") == "uevent",
          f"modules: instance {i} loaded_ns {m['loaded_ns']} within modprobe ({lo_ns}..{hi_ns}), how {m.get('loaded_how')}")
    un = m.get("unloaded_ns")
    lo_ns, hi_ns = ns(f"{i}.burn_end"), ns(f"{i}.rmmod_end") + 2 * 10**9
    check(un is not None and lo_ns <= un <= hi_ns and m.get("unloaded_how") == "uevent",
          f"modules: instance {i} unloaded_ns {un} within rmmod ({lo_ns}..{hi_ns}), how {m.get('unloaded_how')}")
    got = {s["name"]: int(s["addr"], 16) for s in m.get("sections", [])}
    diff = sorted(set(got.items()) ^ set(want["sections"].items()))
    check(not diff and len(got) == len(m.get("sections", [])),
          f"modules: instance {i} has the {len(want['sections'])} sections of sysfs, same addresses "
          f"({len(got)} reported; differing: {diff[:6]})")
    text = [s for s in m.get("sections", []) if s["name"] == ".text"]
    src = text[0].get("len_source") if text else None
    print(f"instance {i}: file {m.get('file')}, build-id {m.get('build_id')}, .text len {text[0]['len'] if text else None} from {src}")
    check(src == "elf", f"modules: instance {i} .text length comes from the ELF file (len_source {src})")

# perfsnapctl events: every entry carries the complete layout after it.
evs = js("events.json").get("events", [])
idx = [k for k, e in enumerate(evs) if e.get("module") == "brd" and e.get("kind") in ("module-add", "module-remove")]
kinds = [evs[k]["kind"] for k in idx]
check(kinds == ["module-add", "module-remove"] * 2, f"events: brd added, removed, added, removed ({kinds})")
# Entries also re-emit the live dynamic symbols (systemd's BPF programs):
# count the section records.
nsecs = lambda e: sum(r.get("type") == "section" for r in e.get("records", []))
for n, k in enumerate(idx[:4]):
    i = n // 2 + 1
    e, prev = evs[k], evs[k - 1] if k > 0 else None
    nsec = len(inst[i]["sections"])
    recs = [r for r in e.get("records", []) if r.get("type") == "section"]
    brd_recs = {r["section"]: int(r["start"], 16) for r in recs if r.get("module") == "brd"}
    pn = nsecs(prev) if prev else None
    en = nsecs(e)
    check(e["n_records"] == len(e.get("records", [])),
          f"events: entry {k} lists all its {e['n_records']} records ({len(e.get('records', []))})")
    if e["kind"] == "module-add":
        check(en == inst[i]["nsec_all"] and pn is not None and en == pn + nsec,
              f"events: add {i} carries {en} section records = sections of all loaded modules "
              f"({inst[i]['nsec_all']}) = the entry before ({pn}, {prev and prev['kind']}) + brd's {nsec}")
        check(brd_recs == inst[i]["sections"], f"events: add {i} records brd's sections at the sysfs addresses "
              f"({len(brd_recs)} brd records)")
    else:
        check(pn is not None and en == pn - nsec and not brd_recs,
              f"events: remove {i} carries {en} section records = the entry before "
              f"({pn}) - brd's {nsec}, none of brd ({len(brd_recs)})")

# Status counters.
s = js("status.json")
print("status: " + ", ".join(f"{k}={s.get(k)}" for k in (
    "samples", "lost", "frequency_hz", "modules_loaded", "modules_added", "modules_removed", "module_uevents",
    "ignored_uevents", "rescans", "layout_events", "last_change_ns", "max_change_ns", "module_frames",
    "module_data_frames", "invalid_user_frames", "unresolved_kernel_frames", "uevents_received", "uevents_accepted", "uevents_forged", "uevents_malformed",
    "uevents_overruns")))
changes = [rd(f"{i}.{w}_change").split()[-1] for i in (1, 2) for w in ("add", "remove")]
print("add->journaled latency (last_change_ns after add 1, remove 1, add 2, remove 2): " + " ".join(changes))
check(s.get("lost") == 0, f"status: lost == 0 ({s.get('lost')})")
check((s.get("modules_added") or 0) >= 2 and (s.get("modules_removed") or 0) >= 2,
      f"status: modules_added {s.get('modules_added')} >= 2, modules_removed {s.get('modules_removed')} >= 2")
check(s.get("uevents_forged") == 0, f"status: uevents_forged == 0 ({s.get('uevents_forged')})")
nproc_mods = len(rd("proc_modules").splitlines())
check(s.get("modules_loaded") == nproc_mods, f"status: modules_loaded {s.get('modules_loaded')} = lines of /proc/modules ({nproc_mods})")
# qemu runs without KVM here, 15-39x slower than the host (an awk loop:
# 82 ms on the host, 1.2-3.2 s in the guest): the < 10 ms target is
# measured natively by bench/module-change.sh; here only a sanity bound.
check(isinstance(s.get("max_change_ns"), int) and 0 < s["max_change_ns"] < 1_000_000_000,
      f"status: add/remove -> journaled at most {s.get('max_change_ns')} ns under qemu TCG (sanity bound 1 s; "
      f"last {s.get('last_change_ns')} ns)")
sys.exit(0 if ok else 1)
PY

cp -r $D /var/lib/perfsnapd/perfsnapd.db* /share/ 2>/dev/null
exit $failed
