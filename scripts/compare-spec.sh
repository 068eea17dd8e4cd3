#!/usr/bin/env bash
# Speculative decoding through the servers (issue 18): braid serve and
# llama-server on the same target GGUF with the same draft GGUF and the same
# synthetic acceptance rates, each beside itself without speculation, driven
# by `braid bench serve` (streaming completions, ignore_eos), rounds
# interleaved (alternating which engine goes first). Six servers run at once
# (one measured at a time):
#
#   braid-none   braid serve, no speculation
#   braid-fixed  --spec draft, NMAX drafts every step (--spec-n-min NMAX),
#                verified with the multi-token tiles (--spec-exact=false):
#                what llama-server's draft-simple does with --spec-draft-p-min
#                0 (it drafts n-max every step and verifies in one batch)
#   braid-auto   --spec draft with braid's defaults: adaptive length up to
#                NMAX, exact verification (greedy output = plain output)
#   braid-autot  the adaptive length verified with the tiles
#                (--spec-exact=false): the planner beside braid-fixed, with
#                the same verification cost
#   llama-none   llama-server, no speculation
#   llama-draft  llama-server -md DRAFT --spec-type draft-simple
#                --spec-draft-n-max NMAX --spec-draft-p-min 0
#
# Every speculative server gets --spec-synth-rates RATES (BENCHMARK ONLY: the
# drafter runs for real, draft i is kept in that share of steps whatever the
# model says; the text is not the model's). Both engines read the rates as
# unconditional shares per draft position and keep draft i with probability
# rate_i/rate_{i-1} once drafts before it were kept, so the expected kept
# drafts per step match.
#
# Concurrencies: CONC for the braid servers, LLAMA_CONC for llama-server
# (at most PARALLEL); 2 x c requests at concurrency c. Prompts come from a
# fixed JSONL dataset (no per-invocation calibration requests), OUT tokens
# each. Needs an existing llama.cpp build (never built here):
#
#   LLAMA_CPP_BIN=... scripts/compare-spec.sh TARGET.gguf DRAFT.gguf
#
# Env: ROUNDS (5), THREADS (2), PARALLEL (8), CTX (1024 per slot), OUT (96),
# NMAX (4), RATES (0.87,0.76,0.68,0.57: the runbook's dense 27B MTP
# acceptance), CONC ("1 4 8"), LLAMA_CONC ("1 4"). Run it at nice -n -20 on a
# shared machine; each round's `uptime` is printed with the tables.
set -euo pipefail
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the directory holding llama-server}"
model=$(realpath "${1:?usage: scripts/compare-spec.sh TARGET.gguf DRAFT.gguf}")
draft=$(realpath "${2:?usage: scripts/compare-spec.sh TARGET.gguf DRAFT.gguf}")
ROUNDS=${ROUNDS:-5} THREADS=${THREADS:-2} PARALLEL=${PARALLEL:-8} CTX=${CTX:-1024} OUT=${OUT:-96}
NMAX=${NMAX:-4} RATES=${RATES:-0.87,0.76,0.68,0.57} CONC=${CONC:-1 4 8} LLAMA_CONC=${LLAMA_CONC:-1 4}
nrates=$(awk -F, '{print NF}' <<<"$RATES")
if [ "$nrates" != "$NMAX" ]; then
	echo "compare-spec: RATES has $nrates values and NMAX is $NMAX; llama-server wants exactly one rate per draft position" >&2
	exit 2
fi
for c in $CONC $LLAMA_CONC; do
	if [ "$c" -gt "$PARALLEL" ]; then
		echo "compare-spec: concurrency $c is above PARALLEL=$PARALLEL" >&2
		exit 2
	fi
done
cd "$(dirname "$0")/.."
# A llama.cpp build without this CPU's SIMD extensions is refused and both
# GGUFs are served from tmpfs (scripts/lib/baseline.sh).
. scripts/lib/baseline.sh
baseline_check "$LLAMA_CPP_BIN"
model=$(baseline_resident "$model")
draft=$(baseline_resident "$draft")
export LD_LIBRARY_PATH="$LLAMA_CPP_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
go build -buildvcs=true -o bin/braid ./cmd/braid
out=$(mktemp -d)
echo "compare-spec: results in $out" >&2
# Fixed prompts: different sentences so that no prompt is another's prefix
# (neither server may answer from a cached prefix), the same for both.
python3 - "$out/prompts.jsonl" "$OUT" <<'PY'
import json, sys
words = "the cat sat on a mat near red door while old men talked about rain and ships at sea".split()
with open(sys.argv[1], "w") as f:
    for i in range(64):
        ws = [words[(i * 7 + j * (i % 5 + 1)) % len(words)] for j in range(40)]
        f.write(json.dumps({"prompt": f"Note {i}: " + " ".join(ws) + ".", "output_len": int(sys.argv[2])}) + "\n")
PY
spec_common=(--spec draft --model-draft "$draft" --spec-n-max "$NMAX" --spec-synth-rates "$RATES")
declare -A port=([braid-none]=18281 [braid-fixed]=18282 [braid-auto]=18283 [llama-none]=18284 [llama-draft]=18285 [braid-autot]=18286)
pids=()
declare -A pid
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
bserve() { # name, extra flags...
	local n=$1
	shift
	bin/braid serve -m "$model" --listen 127.0.0.1:${port[$n]} --parallel "$PARALLEL" -c "$CTX" -t "$THREADS" --alias m "$@" \
		2> "$out/$n.log" &
	pids+=($!) pid[$n]=$!
}
lserve() { # name, extra flags... (llama-server divides -c among its slots)
	local n=$1
	shift
	"$LLAMA_CPP_BIN/llama-server" -m "$model" --host 127.0.0.1 --port ${port[$n]} --parallel "$PARALLEL" \
		-c $((CTX * PARALLEL)) -t "$THREADS" --alias m "$@" > "$out/$n.log" 2>&1 &
	pids+=($!) pid[$n]=$!
}
bserve braid-none
bserve braid-fixed "${spec_common[@]}" --spec-n-min "$NMAX" --spec-exact=false
bserve braid-auto "${spec_common[@]}"
bserve braid-autot "${spec_common[@]}" --spec-exact=false
lserve llama-none
lserve llama-draft -md "$draft" --spec-type draft-simple --spec-draft-n-max "$NMAX" --spec-draft-n-min 0 \
	--spec-draft-p-min 0 -td "$THREADS" --spec-synth-rates "$RATES"
for n in "${!port[@]}"; do
	probe=$([[ $n == braid* ]] && echo ready || echo health)
	ok=0
	for i in $(seq 1 180); do
		kill -0 "${pid[$n]}" 2>/dev/null || break
		if curl -sf "http://127.0.0.1:${port[$n]}/$probe" >/dev/null; then ok=1 && break; fi
		sleep 1
	done
	[ $ok = 1 ] || { echo "compare-spec: $n did not become ready; log:" >&2; tail -20 "$out/$n.log" >&2; exit 1; }
done
run() { # server, concurrency, round
	bin/braid bench serve --url "http://127.0.0.1:${port[$1]}" --model m --dataset "$out/prompts.jsonl" \
		--num-prompts $((2 * $2)) --concurrency "$2" --seed "$3" --json "$out/$1.c$2.$3.json" > /dev/null
}
has() { [[ " $1 " == *" $2 "* ]]; }
for r in $(seq 1 "$ROUNDS"); do
	echo "round $r: $(uptime)" | tee -a "$out/uptime.txt" >&2
	if ((r % 2)); then order="braid llama"; else order="llama braid"; fi
	for c in $(tr ' ' '\n' <<<"$CONC $LLAMA_CONC" | sort -nu); do
		for e in $order; do
			if [ $e = braid ]; then
				has "$CONC" "$c" || continue
				for s in braid-none braid-fixed braid-auto braid-autot; do run $s "$c" "$r"; done
			else
				has "$LLAMA_CONC" "$c" || continue
				for s in llama-none llama-draft; do run $s "$c" "$r"; done
			fi
		done
	done
done
echo "end: $(uptime)" >> "$out/uptime.txt"
# Each speculative server's own acceptance, as it counted it.
for s in braid-fixed braid-auto braid-autot; do
	echo "$s: $(curl -s "http://127.0.0.1:${port[$s]}/metrics" | grep -E '^braid_spec_acceptance_ratio' | tr '\n' ' ')" >> "$out/acceptance.txt"
done
grep -E 'draft acceptance|acceptance rate|n_draft' "$out/llama-draft.log" | tail -3 >> "$out/acceptance.txt" || true
python3 - "$out" "$CONC" "$LLAMA_CONC" <<'PY'
import json, glob, os, statistics, sys
out, conc, lconc = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def load(s, c):
    return {int(p.rsplit(".", 2)[1]): json.load(open(p)) for p in glob.glob(f"{out}/{s}.c{c}.*.json")}
def st(xs): return statistics.median(xs), min(xs), max(xs)
def fmt(t, d=2): return f"{t[0]:.{d}f} [{t[1]:.{d}f}-{t[2]:.{d}f}]"
servers = ["braid-none", "braid-fixed", "braid-auto", "braid-autot", "llama-none", "llama-draft"]
res = {(s, c): load(s, c) for s in servers for c in sorted(set(conc + lconc), key=int)}
print("| server | concurrency | output tok/s | median TPOT ms | failed | rounds |")
print("|---|---|---|---|---|---|")
for s in servers:
    for c in (conc if s.startswith("braid") else lconc):
        rs = list(res[s, c].values())
        if not rs: continue
        print(f"| {s} | {c} | {fmt(st([r['output_throughput'] for r in rs]))} | {fmt(st([r['tpot']['median_ms'] for r in rs]))} | "
              f"{sum(r['failed'] for r in rs)} | {len(rs)} |")
print()
def ratio(a, b, c, key):
    A, B = res[a, c], res[b, c]
    rounds = sorted(set(A) & set(B))
    if key == "tpot":  # lower is better: report b/a so that > 1 means a is faster
        xs = [B[r]['tpot']['median_ms'] / A[r]['tpot']['median_ms'] for r in rounds]
    else:
        xs = [A[r]['output_throughput'] / B[r]['output_throughput'] for r in rounds]
    return xs
print("| ratio (per round) | concurrency | output tok/s | 1/TPOT | per-round tok/s ratios |")
print("|---|---|---|---|---|")
pairs = [("braid-fixed", "llama-draft", lconc), ("braid-none", "llama-none", lconc),
         ("braid-fixed", "braid-none", conc), ("braid-auto", "braid-none", conc), ("braid-autot", "braid-none", conc),
         ("braid-autot", "braid-fixed", conc), ("llama-draft", "llama-none", lconc)]
for a, b, cs in pairs:
    for c in cs:
        if any(c not in (conc if x.startswith("braid") else lconc) for x in (a, b)): continue
        t, p = ratio(a, b, c, "tput"), ratio(a, b, c, "tpot")
        if not t: continue
        print(f"| {a} / {b} | {c} | {fmt(st(t))}x | {fmt(st(p))}x | {' '.join(f'{x:.2f}' for x in t)} |")
print()
print(open(f"{out}/uptime.txt").read())
if os.path.exists(f"{out}/acceptance.txt"): print(open(f"{out}/acceptance.txt").read())
PY
echo "raw results: $out"
