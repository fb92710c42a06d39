# Shared helpers for the integration tests (sourced). Each test gets a
# private directory with its own database, socket and configuration, starts
# the real perfsnapd from the build tree and cleans up after itself.
# Environment from meson: PERFSNAPD, PERFSNAPCTL.

set -u

skip() { echo "SKIP: $*"; exit 77; }
# The daemon log fail shows: $DAEMON_LOG if a test sets it, else $T/daemon.log.
fail() {
        local log=${DAEMON_LOG:-${T:-}/daemon.log}
        echo "FAIL: $*"
        [ -n "${T:-}" ] && [ -f "$log" ] && { echo "--- daemon log:"; tail -40 "$log"; }
        exit 1
}
pass() { echo "ok: $*"; }

require_root() {
        [ "$(id -u)" = 0 ] || skip "needs root (perf events system-wide)"
        command -v python3 >/dev/null || skip "needs python3"
}

# Sets GROUP (adm: it exists on every Debian system; the tests change no
# group) and its GID, for tests of what a group member may do (setpriv).
use_group() {
        command -v setpriv >/dev/null || skip "needs setpriv (util-linux)"
        GROUP=adm
        getent group $GROUP >/dev/null || skip "group $GROUP does not exist"
        GID=$(getent group $GROUP | cut -d: -f3)
}

# A module in the synthetic root $R, in the kernel's formats.
# mkmod NAME BASE(hex, no 0x): sysfs sections .text at BASE, .text.unlikely
# at BASE+0x800, .data at BASE+0x1000, .init.text in a separate area; a
# build-id note derived from the name.
mkmod() {
        local d=$R/sys/module/$1 base=$((16#$2))
        rm -rf "$d"
        mkdir -p "$d/sections" "$d/notes"
        printf '0x%016x\n' $base > "$d/sections/.text"
        printf '0x%016x\n' $((base + 0x800)) > "$d/sections/.text.unlikely"
        printf '0x%016x\n' $((base + 0x1000)) > "$d/sections/.data"
        printf '0x%016x\n' $((base + 0x100000)) > "$d/sections/.init.text"
        # Elf64_Nhdr{4, 20, NT_GNU_BUILD_ID=3} "GNU\0" + 20 bytes of desc
        printf '\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00' > "$d/notes/.note.gnu.build-id"
        printf "$(echo "$1" | sha1sum | cut -c1-40 | sed 's/../\\x&/g')" >> "$d/notes/.note.gnu.build-id"
}
# modules_file LINE...: writes $R/proc/modules
modules_file() { printf '%s\n' "$@" > "$R/proc/modules"; }

# build_id_of FILE: the GNU build-id of an ELF file (hex), empty if none.
build_id_of() {
        readelf -n "$1" 2>/dev/null | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p' | head -1
}

# change_build_id FILE MASK: XORs the first byte of FILE's build-id with
# MASK, in place: the copy of a binary becomes another build. Fails the
# test unless the build-id is in the file exactly once.
change_build_id() {
        python3 - "$1" "$(build_id_of "$1")" "$2" <<'PY' || fail "cannot change the build-id of $1"
import sys
path, bid, mask = sys.argv[1], bytes.fromhex(sys.argv[2]), int(sys.argv[3], 0)
data = bytearray(open(path, "rb").read())
i = data.find(bid)
assert bid and i > 0 and data.find(bid, i + 1) < 0, "the build-id is not in the file once"
data[i] ^= mask
open(path, "wb").write(data)
PY
}

# Creates $T with a configuration; extra "key = value" lines as arguments.
setup_dir() {
        T=$(mktemp -d /tmp/perfsnapd-it.XXXXXX)
        SOCK=$T/perfsnapd.sock
        DB=$T/perfsnapd.db
        CONF=$T/perfsnapd.conf
        {
                echo "database = $DB"
                echo "cache_dir = $T/cache"
                echo "socket = $SOCK"
                echo "drain_interval = 100ms"
                for l in "$@"; do echo "$l"; done
        } > "$CONF"
        export PERFSNAPD_SOCKET=$SOCK
        DPID=
        trap cleanup EXIT
}

cleanup() {
        busy_stop
        if [ -n "${DPID:-}" ] && kill -0 "$DPID" 2>/dev/null; then
                kill -KILL "$DPID" 2>/dev/null
                wait "$DPID" 2>/dev/null
        fi
        rm -rf "$T"
}

# At most 30 s: it returns at the daemon's first answer; a bound, not a
# wait (a sanitizer build that verifies a BPF program on a slow machine).
start_daemon() {
        "$PERFSNAPD" --config "$CONF" "$@" > "$T/daemon.log" 2>&1 &
        DPID=$!
        for _ in $(seq 1 300); do
                [ -S "$SOCK" ] && "$PERFSNAPCTL" status >/dev/null 2>&1 && return 0
                kill -0 "$DPID" 2>/dev/null || fail "perfsnapd exited during start-up"
                sleep 0.1
        done
        fail "perfsnapd did not answer on $SOCK within 30 s"
}

# Stops the daemon with SIGTERM and waits for it (at most 10 s).
stop_daemon() {
        kill -TERM "$DPID"
        for _ in $(seq 1 100); do
                kill -0 "$DPID" 2>/dev/null || break
                sleep 0.1
        done
        kill -0 "$DPID" 2>/dev/null && fail "perfsnapd did not exit within 10 s of SIGTERM"
        wait "$DPID"
        DRC=$?
        DPID=
        # A sanitizer build's report (ASan, UBSan, LSan at exit) fails the
        # test, whatever it checked.
        if grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:' "$T/daemon.log" 2>/dev/null; then
                grep -A20 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:' "$T/daemon.log" | head -40
                fail "a sanitizer reported an error in the daemon (above)"
        fi
}

# ---- Bounded polling, instead of sleeps standing in for synchronization ----
# Each polls every 0.1 s for at most TIMEOUT_S seconds (whole seconds;
# $WAIT_TIMEOUT, 20 unless set). While a daemon is running ($DPID set), its
# exit ends the wait with a failure. Call them in the test's shell, not in
# $(...): fail must end the test.
WAIT_TIMEOUT=${WAIT_TIMEOUT:-20}

# status_field NAME: prints the integer or string member NAME of the
# daemon's status (empty if it did not answer or has no such member).
# `status --format json` prints one member per line.
status_field() {
        "$PERFSNAPCTL" status --format json 2>/dev/null |
                sed -n "s/^ *\"$1\": *\(.*\)\$/\1/; T; s/,\$//; s/^\"\(.*\)\"\$/\1/; p; q"
}

now_ns() { date +%s%N; }

# kernel_at_least MAJOR MINOR: the running kernel is that release or later.
kernel_at_least() {
        local r a b
        r=$(uname -r)
        a=${r%%.*}
        b=${r#*.}
        b=${b%%[!0-9]*}
        [ "$a" -gt "$1" ] || { [ "$a" -eq "$1" ] && [ "$b" -ge "$2" ]; }
}

# Fails if the daemon started by start_daemon ($DPID) has exited.
# check_alive DESC: DESC names what was being waited for.
check_alive() {
        local rc
        [ -n "${DPID:-}" ] || return 0
        kill -0 "$DPID" 2>/dev/null && return 0
        wait "$DPID" 2>/dev/null; rc=$?
        DPID=
        fail "perfsnapd exited (status $rc) while waiting for $1"
}

# poll_until CMD...: runs CMD until it succeeds; 1 if it did not within
# $WAIT_TIMEOUT s.
poll_until() {
        local end=$(( $(now_ns) + WAIT_TIMEOUT * 1000000000 ))
        until "$@"; do
                # The daemon's exit may be what CMD waits for: ask once more.
                kill -0 "${DPID:-$$}" 2>/dev/null || { "$@" && return 0; }
                check_alive "$*"
                [ "$(now_ns)" -lt "$end" ] || return 1
                sleep 0.1
        done
}

# wait_until DESC CMD...: as poll_until; on a timeout fails naming DESC.
wait_until() {
        local desc=$1
        shift
        poll_until "$@" || fail "waited $WAIT_TIMEOUT s for $desc"
}

# poll_field NAME OP VALUE [TIMEOUT_S]: polls status until [ NAME OP VALUE ]
# holds (OP as for test: -ge, -gt, -eq, = ...); 1 on a timeout. Sets FIELD
# to the last value seen.
field_holds() {
        FIELD=$(status_field "$1")
        [ -n "$FIELD" ] && [ "$FIELD" "$2" "$3" ] 2>/dev/null
}
poll_field() {
        local WAIT_TIMEOUT=${4:-$WAIT_TIMEOUT}
        poll_until field_holds "$1" "$2" "$3"
}

# wait_field NAME OP VALUE [TIMEOUT_S]: as poll_field; on a timeout fails
# naming what it waited for and the last value seen.
wait_field() {
        poll_field "$@" || fail "waited ${4:-$WAIT_TIMEOUT} s for status $1 $2 $3; last value: '${FIELD}'"
}

# wait_committed T_NS [TIMEOUT_S]: waits until the committed data holds a
# sample stamped at or after T_NS (a `date +%s%N`): records are processed in
# time order, so everything stamped before T_NS is then committed too.
wait_committed() {
        wait_field newest_sample_ns -ge "$1" "${2:-}"
}

# busy_start N: N busy loops in the background (each ends by itself after
# 60 s at the latest); busy_stop ends them (cleanup does too).
busy_start() {
        local i
        for i in $(seq 1 "$1"); do
                timeout 60 sh -c 'while :; do :; done' &
                BUSY_PIDS="${BUSY_PIDS:-} $!"
        done
}
busy_stop() {
        [ -n "${BUSY_PIDS:-}" ] || return 0
        kill $BUSY_PIDS 2>/dev/null
        wait $BUSY_PIDS 2>/dev/null
        BUSY_PIDS=
}
