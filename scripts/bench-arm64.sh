#!/usr/bin/env bash
# Speed of braid on an arm64 machine (a DGX Spark / GB10, a Graviton, an
# Ampere, an Apple-silicon Linux VM): the NEON/SDOT kernels are tested for
# correctness under qemu-user on every run of scripts/test.sh, but as of
# this script's writing NO arm64 speed of braid has been measured anywhere:
# this script has not been run on arm64 hardware. Its output would be the
# first figures; put them in docs/PERFORMANCE.md ("arm64") with the machine.
#
#   scripts/bench-arm64.sh                       # kernels, memory, a generated 1B model
#   MODEL=/path/to/model.gguf scripts/bench-arm64.sh
#
# Prints the CPU (model, core classes, features, caches, frequency), then,
# ROUNDS times interleaved: BenchmarkDecodeFormats at one thread (decode
# matrix-vector product of MIB MiB of weights per format, GB/s, and the
# kernels hot in L2), BenchmarkMemRead at each thread count, and
# `braid bench` (prefill and decode tok/s) at each thread count; then
# medians with ranges, and the static instructions-per-block table
# (go run ./internal/kernels/asmcount) to read the kernel figures against.
#
# Env: ROUNDS (5), MIB (128), THREADS ("1 2 4 ... nproc"), MODEL (default:
# a llama-1b Q4_K_M shape generated into /dev/shm, random weights),
# P (prompt tokens, 128), N (generated tokens, 32), FORCE=1 to run on a
# machine that is not arm64 (to try the script itself).
set -euo pipefail
ROUNDS=${ROUNDS:-5} MIB=${MIB:-128} P=${P:-128} N=${N:-32}
cd "$(dirname "$0")/.."

arch=$(uname -m)
if [ "$arch" != aarch64 ] && [ "$arch" != arm64 ] && [ "${FORCE:-0}" != 1 ]; then
	echo "bench-arm64.sh: this is $arch, not arm64 (FORCE=1 runs it anyway, to try the script)" >&2
	exit 2
fi
echo "NOTE: no arm64 speed of braid had been measured when this script was written; if docs/PERFORMANCE.md"
echo "      has no arm64 figures yet, what follows is the first measurement: record it there with the machine."
echo

ncpu=$(nproc)
if [ -z "${THREADS:-}" ]; then
	THREADS=""
	for t in 1 2 4 8 16 32 64 128; do
		[ "$t" -lt "$ncpu" ] && THREADS="$THREADS $t"
	done
	THREADS="$THREADS $ncpu"
fi

echo "== machine"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
echo "kernel: $(uname -srm)   go: $(go version | cut -d' ' -f3)"
lscpu 2>/dev/null | grep -E '^(Model name|Vendor ID|CPU\(s\)|Core\(s\) per|Thread\(s\) per|L1d|L2|L3|CPU max MHz|CPU min MHz|NUMA node\(s\))' || true
echo "features: $(grep -m1 -E '^Features' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | tr ' ' '\n' | grep -E '^(asimd|asimddp|asimdhp|fphp|i8mm|bf16|sve|sve2|svei8mm)$' | tr '\n' ' ')"
# Core classes: big.LITTLE parts differ in CPU part (MIDR) and capacity.
for c in /sys/devices/system/cpu/cpu[0-9]*; do
	n=${c##*cpu}
	cap=$(cat "$c/cpu_capacity" 2>/dev/null || echo -)
	max=$(cat "$c/cpufreq/cpuinfo_max_freq" 2>/dev/null || echo -)
	part=$(awk -v n="$n" '/^processor/{p=$3} /^CPU part/{if(p==n) print $4}' /proc/cpuinfo)
	echo "$part capacity=$cap max_khz=$max"
done | sort | uniq -c | sed 's/^/  cpus: /'
free -g 2>/dev/null | sed -n 2p | awk '{print "memory: " $2 " GiB total, " $7 " GiB available"}'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "thread counts: $THREADS"
echo

out=$(mktemp -d)
go test -c -o "$out/kernels.test" ./internal/kernels/
go build -o "$out/braid" ./cmd/braid
"$out/braid" doctor 2>/dev/null | sed -n '/^cpu:/,/^memory:/p' | grep -v '^memory:' || true
echo

if [ -z "${MODEL:-}" ]; then
	MODEL=/dev/shm/bench-arm64-llama-1b-Q4_K_M.gguf
	[ -f "$MODEL" ] || "$out/braid" genmodel --preset llama-1b --type Q4_K_M --out "$MODEL"
fi
[ -f "$MODEL" ] || { echo "MODEL=$MODEL: no such file" >&2; exit 2; }
echo "model: $MODEL"

for r in $(seq 1 "$ROUNDS"); do
	echo "round $r/$ROUNDS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
	BRAID_THREADS=1 BRAID_BENCH_MIB=$MIB "$out/kernels.test" -test.run XXX -test.bench 'DecodeFormats' \
		-test.benchtime 20x >>"$out/formats.txt"
	for t in $THREADS; do
		echo "threads $t" >>"$out/memread.txt"
		BRAID_THREADS=$t "$out/kernels.test" -test.run XXX -test.bench 'MemRead' -test.benchtime 3x >>"$out/memread.txt"
		"$out/braid" bench -m "$MODEL" -p "$P" -n "$N" -r 1 -t "$t" --json >"$out/bench.t$t.$r.json" 2>>"$out/bench.log"
	done
done

python3 - "$out" "$ROUNDS" "$THREADS" <<'PY'
import json, re, statistics, sys
out, rounds, threads = sys.argv[1], int(sys.argv[2]), [int(t) for t in sys.argv[3].split()]
def stat(xs):
    return f"{statistics.median(xs):.1f} [{min(xs):.1f}-{max(xs):.1f}]" if xs else "-"
fm = {}
for line in open(f"{out}/formats.txt"):
    m = re.match(r"BenchmarkDecodeFormats/(Cold|Hot)/(\w+)/(\d+x\d+)\S*\s.*?\s([\d.]+) GB/s", line)
    if m:
        fm.setdefault((m[1], m[2], m[3]), []).append(float(m[4]))
print(f"\n== kernels, one thread (GB/s of weights, median [range] of {rounds})")
print("| format | shape (cold) | cold, beyond the LLC | share of Q4_K | hot, in L2 |")
print("|---|---|---|---|---|")
cold = {k[1]: (k[2], v) for k, v in fm.items() if k[0] == "Cold"}
hot = {k[1]: v for k, v in fm.items() if k[0] == "Hot"}
q4 = statistics.median(cold["Q4_K"][1]) if "Q4_K" in cold else None
for f, (shape, v) in cold.items():
    share = f"{statistics.median(v) / q4 * 100:.0f} %" if q4 else "-"
    print(f"| {f} | {shape} | {stat(v)} | {share} | {stat(hot.get(f, []))} |")
mem, t = {}, None
for line in open(f"{out}/memread.txt"):
    if line.startswith("threads "):
        t = int(line.split()[1])
    m = re.search(r"([\d.]+) GB/s", line)
    if m and t is not None:
        mem.setdefault(t, []).append(float(m[1]))
print(f"\n== braid bench (tok/s, median [range] of {rounds}) and read bandwidth")
print("| threads | prefill | decode | read GB/s (BenchmarkMemRead) |")
print("|---|---|---|---|")
for t in threads:
    pp, tg = [], []
    for r in range(1, rounds + 1):
        try:
            d = json.load(open(f"{out}/bench.t{t}.{r}.json"))[0]
        except (OSError, ValueError, IndexError):
            continue
        pp.append(d["prefill_tps_median"]); tg.append(d["decode_tps_median"])
    print(f"| {t} | {stat(pp)} | {stat(tg)} | {stat(mem.get(t, []))} |")
PY
echo
echo "== static instructions per 256 weights (go run ./internal/kernels/asmcount)"
go run ./internal/kernels/asmcount -dir internal/kernels || true
echo "raw results: $out"
