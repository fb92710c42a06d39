#!/bin/bash
# Start, status, SIGHUP reload, client error messages, clean stop.
. "$(dirname "$0")/lib.sh"
require_root
setup_dir "frequency_hz = 99"

out=$("$PERFSNAPCTL" status 2>&1); rc=$?
[ $rc = 1 ] || fail "status without a daemon: exit $rc, expected 1"
echo "$out" | grep -q "$SOCK" || fail "the not-running error does not name the socket: $out"
pass "no daemon: '$out'"

start_daemon
"$PERFSNAPCTL" status --format json > "$T/s1.json" || fail "status failed"
python3 - "$T/s1.json" <<'PY' || fail "status fields"
import json, sys, os
s = json.load(open(sys.argv[1]))
s = s.get("parameters", s)
for k in ("version", "protocol", "uptime_ns", "cpus", "frequency_hz", "samples", "lost", "db_bytes"):
    assert k in s, f"status lacks {k}: {sorted(s)}"
assert s["frequency_hz"] == 99, s["frequency_hz"]
assert s["cpus"] == os.cpu_count(), (s["cpus"], os.cpu_count())
print("status:", {k: s[k] for k in ("cpus", "frequency_hz", "event", "samples", "lost")})
PY
pass "status reports cpus, frequency, counters"

sed -i 's/^frequency_hz = 99$/frequency_hz = 499/' "$CONF"
kill -HUP "$DPID"
poll_field frequency_hz -eq 499 || fail "frequency not reloaded: frequency_hz is '$FIELD' after $WAIT_TIMEOUT s"
# The new rate must be the rate asked for: 499 Hz on every CPU, nothing lost.
# Idle CPUs are not sampled at the full rate: keep every CPU busy, and
# measure over the daemon's own clock (uptime_ns) between two replies.
ncpu=$(status_field cpus)
busy_start "$ncpu"
# From a drain made with the CPUs busy on.
n0=$(status_field samples)
wait_field samples -gt "$n0"
"$PERFSNAPCTL" status --format json > "$T/s2.json" || fail "status failed"
sleep 2   # the measurement window
"$PERFSNAPCTL" status --format json > "$T/s3.json" || fail "status failed"
busy_stop
python3 - "$T/s2.json" "$T/s3.json" <<'PY' || fail "sampling rate after reload is wrong"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
a, b = a.get("parameters", a), b.get("parameters", b)
seconds = (b["uptime_ns"] - a["uptime_ns"]) / 1e9
rate = (b["samples"] - a["samples"]) / seconds / b["cpus"]
print(f"after reload: {rate:.0f} samples/s per CPU over {seconds:.2f} s on {b['cpus']} busy CPUs, lost {b['lost']}")
assert b["frequency_hz"] == 499, b["frequency_hz"]
assert b["lost"] == 0, f"lost {b['lost']} records after the reload"
assert 250 <= rate <= 700, f"expected about 499 samples/s per CPU, got {rate:.0f}"
PY
grep -q "Reloaded" "$T/daemon.log" || fail "no reload log line"
pass "SIGHUP reloaded frequency_hz = 499"

echo "frequency_hz = banana" >> "$CONF"
kill -HUP "$DPID"
poll_until grep -q "Reload failed" "$T/daemon.log"
kill -0 "$DPID" || fail "a bad config on reload killed the daemon"
grep -q "Reload failed" "$T/daemon.log" || fail "bad reload not reported"
pass "a bad config on reload is reported and the old one kept"

out=$("$PERFSNAPCTL" query --since 5x 2>&1); rc=$?
[ $rc = 1 ] || fail "bad time: exit $rc"
echo "$out" | grep -q "invalid --since '5x'" || fail "bad time message: $out"
echo "$out" | grep -q "30s, 5m" || fail "bad time message does not say what is accepted: $out"
pass "bad time expression: '$out'"

"$PERFSNAPCTL" query --since "@$(date +%s)" --until now >/dev/null || fail "@EPOCH .. now failed"
"$PERFSNAPCTL" query --since "$(date '+%Y-%m-%d %H:%M')" >/dev/null || fail "local time form failed"
pass "absolute time forms accepted"

"$PERFSNAPD" --config "$CONF" --check-config >/dev/null 2>&1 && fail "--check-config accepted an invalid file"
"$PERFSNAPD" --check-config --config "$CONF" 2>&1 | grep -q "$CONF:[0-9]*: invalid value \"banana\" for frequency_hz" \
        || fail "--check-config does not name file, line and key"
pass "--check-config reports file:line: problem"

# Not a text file, or a socket path that cannot be bound: refused at once.
printf 'frequency_hz = 99\n\0nonsense = 1\n' > "$T/nul.conf"
out=$("$PERFSNAPD" --check-config --config "$T/nul.conf" 2>&1) && fail "--check-config accepted a file with a NUL byte"
echo "$out" | grep -q "nul.conf:2: a NUL byte" || fail "NUL byte: $out"
mkfifo "$T/fifo.conf"
out=$(timeout 5 "$PERFSNAPD" --check-config --config "$T/fifo.conf" 2>&1); rc=$?
[ $rc != 124 ] || fail "--check-config waited on a FIFO"
[ $rc != 0 ] && echo "$out" | grep -q "not a regular file" || fail "FIFO: exit $rc: $out"
printf 'socket = /%s\n' "$(head -c 120 /dev/zero | tr '\0' s)" > "$T/long.conf"
out=$("$PERFSNAPD" --check-config --config "$T/long.conf" 2>&1) && fail "--check-config accepted a socket path of 121 bytes"
echo "$out" | grep -q "107 bytes" || fail "long socket path: $out"
pass "--check-config refuses a NUL byte, a FIFO and a socket path too long to bind"

stop_daemon
[ "$DRC" = 0 ] || fail "exit status $DRC after SIGTERM"
[ -S "$SOCK" ] && fail "socket left behind"
pass "clean stop, socket removed"
