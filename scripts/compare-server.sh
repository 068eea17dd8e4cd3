#!/usr/bin/env bash
# Side-by-side serving: braid serve and llama-server on the same GGUF, same
# --parallel, context per slot and threads, both driven by `braid bench
# serve` (streaming completions, ignore_eos), rounds interleaved: each round
# runs concurrency 1 and concurrency PARALLEL against braid, then llama-server
# (alternating which goes first). Needs an existing llama.cpp build (never
# built here): LLAMA_CPP_BIN=/path/to/build/bin.
#
#   LLAMA_CPP_BIN=... scripts/compare-server.sh MODEL.gguf
#
# Env: ROUNDS (5), PARALLEL (8), THREADS (2), CTX (1024 per slot), IN (64),
# OUT (64), N1 (3 requests at concurrency 1), NP (2*PARALLEL at PARALLEL).
set -euo pipefail
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the directory holding llama-server}"
model=$(realpath "${1:?usage: scripts/compare-server.sh MODEL.gguf}")
ROUNDS=${ROUNDS:-5} PARALLEL=${PARALLEL:-8} THREADS=${THREADS:-2} CTX=${CTX:-1024}
IN=${IN:-64} OUT=${OUT:-64} N1=${N1:-3} NP=${NP:-$((2 * PARALLEL))}
cd "$(dirname "$0")/.."
# A llama.cpp build without this CPU's SIMD extensions is refused and the
# GGUF is served from tmpfs by both (scripts/lib/baseline.sh).
. scripts/lib/baseline.sh
baseline_check "$LLAMA_CPP_BIN"
model=$(baseline_resident "$model")
export LD_LIBRARY_PATH="$LLAMA_CPP_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
go build -buildvcs=true -o bin/braid ./cmd/braid
out=$(mktemp -d)
bp=18181 lp=18182
bin/braid serve -m "$model" --listen 127.0.0.1:$bp --parallel "$PARALLEL" -c "$CTX" -t "$THREADS" --alias m 2> "$out/braid.log" &
bpid=$!
# llama-server divides -c among its slots.
"$LLAMA_CPP_BIN/llama-server" -m "$model" --host 127.0.0.1 --port $lp --parallel "$PARALLEL" -c $((CTX * PARALLEL)) \
	-t "$THREADS" --alias m > "$out/llama.log" 2>&1 &
lpid=$!
trap 'kill $bpid $lpid 2>/dev/null; wait 2>/dev/null' EXIT
# Ready: braid's /ready, llama-server's /health (both 200 once loaded).
for probe in $bp/ready $lp/health; do
	for i in $(seq 1 120); do curl -sf http://127.0.0.1:$probe >/dev/null && break; sleep 1; done
done
run() { # server port, concurrency, requests, round
	bin/braid bench serve --url http://127.0.0.1:$2 --model m --num-prompts "$4" --input-len "$IN" --output-len "$OUT" \
		--concurrency "$3" --seed "$5" --json "$out/$1.c$3.$5.json" > /dev/null
}
for r in $(seq 1 "$ROUNDS"); do
	if (( r % 2 )); then order="braid llama"; else order="llama braid"; fi
	for s in $order; do
		port=$([ $s = braid ] && echo $bp || echo $lp)
		run $s $port 1 "$N1" "$r"
		run $s $port "$PARALLEL" "$NP" "$r"
	done
done
python3 - "$out" "$PARALLEL" <<'PY'
import json, glob, statistics, sys
out, par = sys.argv[1], sys.argv[2]
def load(s, c):
    return [json.load(open(p)) for p in sorted(glob.glob(f"{out}/{s}.c{c}.*.json"))]
def st(xs): return statistics.median(xs), min(xs), max(xs)
def fmt(t): return f"{t[0]:.2f} [{t[1]:.2f}-{t[2]:.2f}]"
print("| server | concurrency | output tok/s | median TTFT ms | median TPOT ms | median ITL ms | failed |")
print("|---|---|---|---|---|---|---|")
res = {}
for s in ("braid", "llama"):
    for c in ("1", par):
        rs = load(s, c)
        res[s, c] = rs
        print(f"| {s} | {c} | {fmt(st([r['output_throughput'] for r in rs]))} | {fmt(st([r['ttft']['median_ms'] for r in rs]))} | "
              f"{fmt(st([r['tpot']['median_ms'] for r in rs]))} | {fmt(st([r['itl']['median_ms'] for r in rs]))} | {sum(r['failed'] for r in rs)} |")
print()
for c in ("1", par):
    ratios = [b['output_throughput'] / l['output_throughput'] for b, l in zip(res['braid', c], res['llama', c])]
    tt = [b['ttft']['median_ms'] / l['ttft']['median_ms'] for b, l in zip(res['braid', c], res['llama', c])]
    print(f"concurrency {c}: throughput braid/llama-server {fmt(st(ratios))}x; median TTFT braid/llama-server {fmt(st(tt))}x")
for s in ("braid", "llama"):
    agg = [p['output_throughput'] / o['output_throughput'] for p, o in zip(res[s, par], res[s, "1"])]
    print(f"{s}: {par} streams / 1 stream output throughput {fmt(st(agg))}x")
    # Decode alone: P x the per-stream gap at 1 over the gap at P. ITL is
    # the median gap between a stream's tokens; TPOT also carries the
    # steps that read joining requests' prompts.
    for k in ("itl", "tpot"):
        dec = [int(par) * o[k]['median_ms'] / p[k]['median_ms'] for p, o in zip(res[s, par], res[s, "1"])]
        print(f"{s}: {par} streams / 1 stream decode, {par} x {k.upper()}(1) / {k.upper()}({par}) {fmt(st(dec))}x")
PY
echo "raw results: $out"
