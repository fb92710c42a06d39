#!/bin/bash
# export_url: the real daemon pushes a pprof of each export_interval to a
# local HTTP receiver (push-receiver.py), which keeps the bodies; each is
# read by go tool pprof. While the receiver answers 503 the profiles queue
# (bounded by export_queue_max, the oldest dropped and counted), and when
# it answers again the queue drains by itself; a 400 drops a profile.
. "$(dirname "$0")/lib.sh"
require_root
command -v go >/dev/null || skip "needs go tool pprof (golang-go)"
export GOCACHE=${GOCACHE:-/tmp/perfsnapd-test-gocache} HOME=${HOME:-/root}
HERE=$(cd "$(dirname "$0")" && pwd)

setup_dir
mkdir -p "$T/recv"
python3 "$HERE/push-receiver.py" "$T/recv" & RPID=$!
trap 'kill $RPID 2>/dev/null; cleanup' EXIT
wait_until "the receiver's port" test -s "$T/recv/port"
PORT=$(cat "$T/recv/port")
URL="http://127.0.0.1:$PORT/ingest?name=test.cpu&format=pprof&from={from}&until={until}"
cat >> "$CONF" <<EOF
frequency_hz = 999
export_url = $URL
export_interval = 2s
export_queue_max = 3
EOF
start_daemon
[ "$(status_field push_url)" = "http://127.0.0.1:$PORT/ingest" ] ||
        fail "status push_url shows '$(status_field push_url)', not the URL without its query"

busy_start 1
timeout 6 dd if=/dev/zero of=/dev/null bs=64k 2>/dev/null || true
WAIT_TIMEOUT=30 wait_field push_pushed -ge 2
[ "$(status_field push_failed)" = 0 ] || fail "pushes failed: $(status_field push_last_error)"

# Each profile received so far as go tool pprof -raw reads it (BODY.raw),
# found by its .url file, which the receiver writes after the body.
read_profiles() {
        local u body
        for u in "$T"/recv/[0-9]*.url; do
                body=${u%.url}.pb.gz
                go tool pprof -raw "$body" > "$body.raw" 2> "$body.err" ||
                        { cat "$body.err"; fail "go tool pprof cannot read $body"; }
        done
}
read_profiles
# Profiles that came after the loop above are left out.
python3 - "$T/recv" <<'PY' || fail "the pushed profiles are wrong (above)"
import glob, os, re, sys
d = sys.argv[1]
urls = sorted((u for u in glob.glob(f"{d}/*.url") if os.path.exists(u.replace(".url", ".pb.gz.raw"))),
              key=lambda p: int(os.path.basename(p).split(".")[0]))
assert len(urls) >= 2, urls
prev_until = None
total = 0
for u in urls:
    path, ctype = open(u).read().split("\n")[:2]
    m = re.fullmatch(r"/ingest\?name=test\.cpu&format=pprof&from=(\d+)&until=(\d+)", path)
    assert m, path
    f, t = int(m.group(1)), int(m.group(2))
    assert t > f, path
    # Intervals follow each other (seconds, rounded down).
    assert prev_until is None or f in (prev_until, prev_until - 1), (prev_until, f)
    prev_until = t
    assert ctype == "application/octet-stream", ctype
    raw = open(u.replace(".url", ".pb.gz.raw")).read()
    assert "PeriodType: cpu nanoseconds" in raw, raw[:300]
    total += sum(int(x) for x in re.findall(r"^\s+(\d+)\s+\d+:", raw, re.M))
assert total > 100, f"only {total} samples in {len(urls)} profiles"
print(f"{len(urls)} profiles received, {total} samples in them")
PY

# The receiver refuses: profiles queue, at most 3, the oldest dropped.
PUSHED=$(status_field push_pushed)
touch "$T/recv/fail"
WAIT_TIMEOUT=30 wait_field push_failed -ge 1
WAIT_TIMEOUT=40 wait_field push_dropped -ge 1
[ "$(status_field push_queued)" -le 3 ] || fail "queued $(status_field push_queued) > export_queue_max 3"
case "$(status_field push_last_error)" in
*503*) ;;
*) fail "push_last_error says '$(status_field push_last_error)', not the 503" ;;
esac
[ "$(stat -c %a "$T/cache/push")" = 700 ] || fail "the queue directory is mode $(stat -c %a "$T/cache/push")"
for f in "$T"/cache/push/*.pb.gz; do
        [ "$(stat -c %a "$f")" = 600 ] || fail "$f is mode $(stat -c %a "$f")"
done

# It answers again: the queue drains by itself (backoff at most 40 s here).
rm "$T/recv/fail"
WAIT_TIMEOUT=90 wait_field push_queued -eq 0
WAIT_TIMEOUT=30 wait_field push_pushed -ge $(( PUSHED + 3 ))

# It refuses profiles for good (400): each is dropped at once, not
# retried, and the ones behind it are sent.
DROPPED=$(status_field push_dropped)
touch "$T/recv/reject"
WAIT_TIMEOUT=30 wait_field push_dropped -ge $(( DROPPED + 2 ))
rm "$T/recv/reject"
[ "$(status_field push_queued)" -le 1 ] || fail "refused profiles stay queued: $(status_field push_queued)"
case "$(status_field push_last_error)" in
*400*) ;;
*) fail "push_last_error says '$(status_field push_last_error)', not the 400" ;;
esac
busy_stop
echo "status: pushed $(status_field push_pushed), failed $(status_field push_failed), dropped $(status_field push_dropped)"
stop_daemon
pass "profiles pushed to export_url, queued, dropped past the bound and sent again"

# An interval is read only once: the daemon drains and commits before it
# reads one, so with a drain_interval of 60 s the profiles still hold every
# sample of their intervals (the same total as a query of the same span,
# which drains too).
rm -f "$T"/recv/[0-9]*
echo "drain_interval = 60s" >> "$CONF"
start_daemon
busy_start 1
WAIT_TIMEOUT=30 wait_field push_pushed -ge 3
busy_stop
# The profiles received so far (later ones are left out: the daemon goes
# on pushing), then a query of the span they cover.
read_profiles
read -r FROM UNTIL PUSHED_N <<< "$(python3 - "$T/recv" <<'PY'
import glob, os, re, sys
d = sys.argv[1]
lo, hi, total = None, None, 0
for u in glob.glob(f"{d}/[0-9]*.url"):
    if not os.path.exists(u.replace(".url", ".pb.gz.raw")):
        continue
    f, t = map(int, re.search(r"from=(\d+)&until=(\d+)", open(u).read()).groups())
    lo, hi = min(lo or f, f), max(hi or t, t)
    total += sum(int(x) for x in re.findall(r"^\s+(\d+)\s+\d+:", open(u.replace(".url", ".pb.gz.raw")).read(), re.M))
print(lo, hi, total)
PY
)"
QUERY_N=$("$PERFSNAPCTL" query --since "@$FROM" --until "@$UNTIL" --format json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["result"]["total"])')
echo "drain_interval 60 s: profiles of $FROM..$UNTIL hold $PUSHED_N samples; a query of the span $QUERY_N"
[ "$PUSHED_N" -gt 0 ] && [ "$PUSHED_N" = "$QUERY_N" ] ||
        fail "with drain_interval 60 s the profiles of $FROM..$UNTIL hold $PUSHED_N samples, a query of the span $QUERY_N"
stop_daemon
pass "a pushed interval holds all its samples with a drain_interval of 60 s ($PUSHED_N)"
