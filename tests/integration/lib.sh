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
