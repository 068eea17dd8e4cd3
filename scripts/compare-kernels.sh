#!/usr/bin/env bash
# Side-by-side kernel speed: braid's MatMul benchmarks and llama.cpp's own
# MUL_MAT kernels (test-backend-ops perf) on the shapes both have, plus the
# machine's read bandwidth, interleaved round by round. Needs an existing
# llama.cpp build (never built here): LLAMA_CPP_BIN=/path/to/build/bin.
#
#   LLAMA_CPP_BIN=... scripts/compare-kernels.sh
#
# Env: ROUNDS (5), THREADS (2), TYPES ("q4_K q6_K q8_0 q4_0 f16"),
# PREFILL_TYPES ("q4_K q8_0 f16").
set -euo pipefail
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the directory holding test-backend-ops}"
ROUNDS=${ROUNDS:-5} THREADS=${THREADS:-2}
TYPES=${TYPES:-"q4_K q6_K q8_0 q4_0 f16"} PREFILL_TYPES=${PREFILL_TYPES:-"q4_K q8_0 f16"}
cd "$(dirname "$0")/.."
out=$(mktemp -d)
go test -c -o "$out/kernels.test" ./internal/kernels/
upper() { echo "$1" | sed 's/q/Q/; s/f16/F16/; s/_k/_K/'; }
for r in $(seq 1 "$ROUNDS"); do
	BRAID_THREADS=$THREADS "$out/kernels.test" -test.run XXX -test.bench 'MemRead' -test.benchtime 3x >> "$out/memread.txt"
	for t in $TYPES; do
		for k in 4096 14336; do
			# test-backend-ops times n=512 only at k=14336.
			ns="1"; [[ " $PREFILL_TYPES " == *" $t "* && $k == 14336 ]] && ns="1 512"
			for n in $ns; do
				bt=$( [ "$n" = 1 ] && echo 30 || echo 2 )
				BRAID_THREADS=$THREADS "$out/kernels.test" -test.run XXX -test.bench "(MatMul|Prefill)/$(upper $t)/4096x$k/n=$n\$" -test.benchtime ${bt}x >> "$out/braid.txt"
				"$LLAMA_CPP_BIN/test-backend-ops" perf -b CPU -o MUL_MAT -p "type_a=$t,type_b=f32,m=4096,n=$n,k=$k,bs=\\[1,1\\],nr=\\[1,1\\]" 2>/dev/null | grep 'MUL_MAT(' >> "$out/llama.txt" || true
			done
		done
	done
done
python3 - "$out" <<'PY'
import re, statistics, sys
out = sys.argv[1]
size = {"q4_K": (256, 144), "q6_K": (256, 210), "q8_0": (32, 34), "q4_0": (32, 18), "f16": (1, 2)}
def stat(xs): return statistics.median(xs), min(xs), max(xs)
mem = [float(m) for m in re.findall(r"([\d.]+) GB/s", open(f"{out}/memread.txt").read())]
bw = stat(mem)
print(f"read bandwidth (BenchmarkMemRead, 2 GiB, median [range] of {len(mem)}): {bw[0]:.1f} [{bw[1]:.1f}-{bw[2]:.1f}] GB/s\n")
braid, llama = {}, {}
for line in open(f"{out}/braid.txt"):
    m = re.match(r"Benchmark(?:MatMul|Prefill)/(\w+)/(\d+)x(\d+)/n=(\d+)-\d+\s+\d+\s+(\d+) ns/op", line)
    if m:
        braid.setdefault((m[1].lower().replace("_k", "_K"), int(m[3]), int(m[4])), []).append(float(m[5]) / 1e3)
for line in open(f"{out}/llama.txt"):
    m = re.search(r"type_a=(\w+),type_b=f32,m=4096,n=(\d+),k=(\d+),.*?([\d.]+) us/run", line)
    if m:
        llama.setdefault((m[1], int(m[3]), int(m[2])), []).append(float(m[4]))
print("| format | shape (rows x cols) | n | braid us median [range] | llama.cpp us median [range] | braid/llama.cpp speed | braid GB/s | share of read bandwidth | braid GFLOP/s |")
print("|---|---|---|---|---|---|---|---|---|")
for key in sorted(braid):
    t, k, n = key
    if key not in llama: continue
    b, l = stat(braid[key]), stat(llama[key])
    bs, ts = size[t]
    wbytes = 4096 * k // bs * ts
    gbs = wbytes / (b[0] * 1e3)
    flops = 2 * 4096 * k * n / (b[0] * 1e3)
    print(f"| {t} | 4096x{k} | {n} | {b[0]:.0f} [{b[1]:.0f}-{b[2]:.0f}] | {l[0]:.0f} [{l[1]:.0f}-{l[2]:.0f}] | {l[0]/b[0]:.2f}x | {gbs:.1f} | {gbs/bw[0]*100:.0f} % | {flops:.0f} |")
PY
echo "raw results: $out"
