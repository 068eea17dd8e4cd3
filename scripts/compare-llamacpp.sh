#!/usr/bin/env bash
# Side-by-side single-node speed: braid bench and llama-bench on the same
# GGUF files, same threads, interleaved run by run so both see the same
# machine state. Needs an existing llama.cpp build (this script never builds
# it): LLAMA_CPP_BIN=/path/to/llama.cpp/build/bin.
#
#   LLAMA_CPP_BIN=... scripts/compare-llamacpp.sh MODEL.gguf [MODEL.gguf ...]
#
# The llama.cpp build must use every SIMD extension of this CPU and each GGUF
# is measured from tmpfs (scripts/lib/baseline.sh).
#
# Env: THREADS ("1 2": each count is measured), PROMPT (512), GEN (128), ROUNDS (5): each round runs one
# braid bench and one llama-bench of one repetition each, alternating which
# goes first; the summary gives medians, ranges and braid/llama.cpp ratios.
set -euo pipefail
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the directory holding llama-bench}"
THREADS=${THREADS:-"1 2"} PROMPT=${PROMPT:-512} GEN=${GEN:-128} ROUNDS=${ROUNDS:-5}
args=()
for m in "$@"; do args+=("$(realpath "$m")"); done
cd "$(dirname "$0")/.."
. scripts/lib/baseline.sh
baseline_check "$LLAMA_CPP_BIN"
models=()
for m in "${args[@]}"; do models+=("$(baseline_resident "$m")"); done
go build -buildvcs=true -o bin/braid ./cmd/braid
out=$(mktemp -d)
export LD_LIBRARY_PATH="$LLAMA_CPP_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for m in "${models[@]}"; do
	for t in $THREADS; do
		name="$(basename "$m" .gguf).t$t"
		for r in $(seq 1 "$ROUNDS"); do
			# /usr/bin/time -f %M: the peak resident set of each whole process, measured the same way for both.
			run_braid() { /usr/bin/time -f %M -o "$out/$name.braid.$r.rss" ./bin/braid bench -m "$m" -p "$PROMPT" -n "$GEN" -r 1 -t "$t" --json > "$out/$name.braid.$r.json"; }
			run_llama() { /usr/bin/time -f %M -o "$out/$name.llama.$r.rss" "$LLAMA_CPP_BIN/llama-bench" -m "$m" -p "$PROMPT" -n "$GEN" -r 1 -t "$t" -o json > "$out/$name.llama.$r.json" 2>/dev/null; }
			if (( r % 2 )); then run_braid; run_llama; else run_llama; run_braid; fi
		done
	done
done
names=()
for m in "${models[@]}"; do for t in $THREADS; do names+=("$(basename "$m" .gguf).t$t"); done; done
python3 - "$out" "${names[@]}" <<'PY'
import json, statistics, sys, os, glob
out, models = sys.argv[1], sys.argv[2:]
def med(xs): return statistics.median(xs), min(xs), max(xs)
def rss(path):
    return statistics.median(int(open(p).read().split()[-1]) * 1024 for p in glob.glob(path))
print("| model | test | braid tok/s median [range] | llama.cpp tok/s median [range] | ratio |")
print("|---|---|---|---|---|")
for m in models:
    name = m
    b = [json.load(open(p))[0] for p in sorted(glob.glob(f"{out}/{name}.braid.*.json"))]
    l = [json.load(open(p)) for p in sorted(glob.glob(f"{out}/{name}.llama.*.json"))]
    for test, bk, lkey in (("pp", "prefill_tps_median", "n_prompt"), ("tg", "decode_tps_median", "n_gen")):
        bs = [x[bk] for x in b]
        ls = [t["avg_ts"] for run in l for t in run if t[lkey] > 0 and t["n_prompt" if lkey == "n_gen" else "n_gen"] == 0]
        if not bs or not ls: continue
        bm, lm = med(bs), med(ls)
        n = b[0]["prompt_tokens"] if test == "pp" else b[0]["gen_tokens"]
        print(f"| {name} | {test}{n} | {bm[0]:.2f} [{bm[1]:.2f}-{bm[2]:.2f}] | {lm[0]:.2f} [{lm[1]:.2f}-{lm[2]:.2f}] | {bm[0]/lm[0]:.2f}x |")
    br, lr = rss(f"{out}/{name}.braid.*.rss"), rss(f"{out}/{name}.llama.*.rss")
    print(f"| {name} | peak RSS (median) | {br/2**20:.0f} MiB | {lr/2**20:.0f} MiB | {br/lr:.2f}x |")
PY
echo "raw results: $out"
