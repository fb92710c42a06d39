#!/bin/bash
# bench/workload.sh KIND SECONDS: a workload for the benchmarks, on all CPUs.
#   steady  one `dd if=/dev/zero of=/dev/null` and one `yes > /dev/null`
#           per 2 CPUs: the same few stacks for ever
#   mixed   fork/exec-heavy, like a build: gcc -O2 of a 400-line C file,
#           find over /usr, and shell pipelines (sort, grep, sed, awk),
#           one loop of each per CPU
#   idle    mostly idle: a 20 ms burst of work every second
#   jit     node --perf-basic-prof (Debian package nodejs) on each CPU,
#           calling 200 generated JS functions at call depths 5-25: JIT
#           frames named from /tmp/perf-PID.map, deep stacks
set -u
KIND=${1:?usage: workload.sh steady|mixed|idle|jit SECONDS}
SECS=${2:?usage: workload.sh steady|mixed|idle|jit SECONDS}
N=$(nproc)
W=$(mktemp -d /tmp/perfsnapd-workload.XXXXXX)
# node leaves its /tmp/perf-PID.map behind; the jit kind lists them in $W/maps.
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; [ -f "$W/maps" ] && xargs rm -f < "$W/maps"; rm -rf "$W"' EXIT
end=$(( $(date +%s) + SECS ))

case "$KIND" in
steady)
        for _ in $(seq 1 $(( (N + 1) / 2 ))); do
                timeout "$SECS" dd if=/dev/zero of=/dev/null bs=1M 2>/dev/null &
                timeout "$SECS" sh -c 'yes > /dev/null' &
        done
        ;;
mixed)
        # A C file with many functions, so cc1 has real work to do.
        python3 - "$W/big.c" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(400):
        f.write(f"int f{i}(int x) {{ int s = 0; for (int j = 0; j < x; j++) s += (j * {i}) ^ (s >> 3); return s + {i}; }}\n")
    f.write("int main(void) { int s = 0;\n" + "".join(f" s += f{i}(s & 7);\n" for i in range(400)) + " return s & 1; }\n")
PY
        for _ in $(seq 1 "$N"); do
                ( while [ "$(date +%s)" -lt "$end" ]; do gcc -O2 -c "$W/big.c" -o "$W/big.$BASHPID.o" 2>/dev/null; done ) &
                ( while [ "$(date +%s)" -lt "$end" ]; do find /usr -name '*.h' -newer /etc/hostname 2>/dev/null | wc -l > /dev/null; done ) &
                ( while [ "$(date +%s)" -lt "$end" ]; do
                        ls -l /usr/bin | sort -k5 -n | awk '{ s += $5 } END { print s }' | sed 's/0/o/g' | grep -c o > /dev/null
                  done ) &
        done
        ;;
jit)
        NODE=$(command -v node || command -v nodejs) || { echo "jit needs node (Debian package nodejs)" >&2; exit 77; }
        cat > "$W/burn.js" <<'JS'
const end = Date.now() + 1000 * +process.argv[2];
const fs = [];
for (let i = 0; i < 200; i++)
        fs.push(new Function('n', 'x', `let s = x; for (let k = 0; k < n; k++) s = (s * 31 + k + ${i}) | 0; return s;`));
function rec(d, i, x) {
        if (d === 0)
                return fs[i % fs.length](50, x);
        return rec(d - 1, (i * 7 + d) % 997, x) ^ fs[(i + d) % fs.length](10, x);
}
let acc = 0;
for (let it = 0; Date.now() < end; it++)
        acc ^= rec(5 + (it % 20), it, acc);
console.log(acc);
JS
        # In $W: node writes an isolate-*-v8.log into its working directory.
        for _ in $(seq 1 "$N"); do
                (cd "$W" && exec "$NODE" --perf-basic-prof burn.js "$SECS" > /dev/null) &
                echo "/tmp/perf-$!.map" >> "$W/maps"
        done
        ;;
idle)
        ( while [ "$(date +%s)" -lt "$end" ]; do timeout 0.02 sh -c 'while :; do :; done'; sleep 1; done ) &
        ;;
*)
        echo "unknown workload $KIND" >&2
        exit 2
        ;;
esac
wait
