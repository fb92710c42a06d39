# Shared helpers for the integration tests (sourced). Each test gets a
# private directory with its own database, socket and configuration, starts
# the real perfsnapd from the build tree and cleans up after itself.
# Environment from meson: PERFSNAPD, PERFSNAPCTL.

set -u

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; [ -n "${T:-}" ] && [ -f "$T/daemon.log" ] && { echo "--- daemon log:"; tail -40 "$T/daemon.log"; }; exit 1; }
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
        if [ -n "${DPID:-}" ] && kill -0 "$DPID" 2>/dev/null; then
                kill -KILL "$DPID" 2>/dev/null
                wait "$DPID" 2>/dev/null
        fi
        rm -rf "$T"
}

start_daemon() {
        "$PERFSNAPD" --config "$CONF" "$@" > "$T/daemon.log" 2>&1 &
        DPID=$!
        for _ in $(seq 1 100); do
                [ -S "$SOCK" ] && "$PERFSNAPCTL" status >/dev/null 2>&1 && return 0
                kill -0 "$DPID" 2>/dev/null || fail "perfsnapd exited during start-up"
                sleep 0.1
        done
        fail "perfsnapd did not answer on $SOCK within 10 s"
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
}
