#!/usr/bin/env bash
# Side-by-side decode/prefill of braid's cluster splits and llama.cpp's RPC
# backend on this machine, same GGUF, same compute threads, A/B interleaved.
#
#   LLAMA_CPP_BIN=/path/to/llama.cpp/build/bin MODEL=model.gguf RUNS=5 scripts/cluster-vs-llamacpp.sh > results.jsonl
#
# LLAMA_CPP_BIN must hold an existing build (llama-bench, ggml-rpc-server);
# this script never builds llama.cpp. Every round runs each configuration
# once (-r 1 after llama-bench's own warm-up / braid's warm-up run), so
# drifts of the shared machine hit all of them alike. One JSON line per
# configuration and round: {"round", "name", "pp_tps", "tg_tps"}.
#
# Thread totals: llama.cpp with -ngl 99 computes on its two 1-thread
# rpc-servers (the client only drives them); braid's coordinator is rank 0
# and computes a shard, so its 2-rank runs are the coordinator (-t 1) and
# one worker (-t 1): two compute threads each. The 3-rank braid runs add a
# second worker (three threads on this 2-core machine: oversubscribed, said
# so in the name).
set -euo pipefail
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the bin directory of a llama.cpp build}"
MODEL=$(realpath "${MODEL:?set MODEL to a GGUF}")
RUNS=${RUNS:-5}
P=${P:-64}
N=${N:-32}
cd "$(dirname "$0")/.."
# A llama.cpp build without this CPU's SIMD extensions is refused and the
# GGUF is read from tmpfs by every rank (scripts/lib/baseline.sh).
. scripts/lib/baseline.sh
baseline_check "$LLAMA_CPP_BIN"
MODEL=$(baseline_resident "$MODEL")
export LD_LIBRARY_PATH="$LLAMA_CPP_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
BRAID=${BRAID:-./bin/braid}
[ -x "$BRAID" ] || go build -o "$BRAID" ./cmd/braid

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$LLAMA_CPP_BIN/ggml-rpc-server" -t 1 -p 50071 >/dev/null 2>&1 & pids+=($!)
"$LLAMA_CPP_BIN/ggml-rpc-server" -t 1 -p 50072 >/dev/null 2>&1 & pids+=($!)
"$LLAMA_CPP_BIN/ggml-rpc-server" -t 1 -p 50073 >/dev/null 2>&1 & pids+=($!)
"$BRAID" worker --listen 127.0.0.1:50081 -t 1 >/dev/null 2>&1 & pids+=($!)
"$BRAID" worker --listen 127.0.0.1:50082 -t 1 >/dev/null 2>&1 & pids+=($!)
sleep 2

llama() { # name, llama-bench args...
	local name=$1; shift
	local out
	out=$("$LLAMA_CPP_BIN/llama-bench" -m "$MODEL" -p "$P" -n "$N" -r 1 -o json "$@" 2>/dev/null) || { echo "{\"round\":$r,\"name\":\"$name\",\"error\":true}"; return; }
	python3 -c '
import json,sys
rows=json.loads(sys.argv[1]); pp=tg=0
for x in rows:
    if x["n_prompt"]>0: pp=x["avg_ts"]
    if x["n_gen"]>0: tg=x["avg_ts"]
print(json.dumps({"round":int(sys.argv[2]),"name":sys.argv[3],"pp_tps":pp,"tg_tps":tg}))' "$out" "$r" "$name"
}
braid() { # name, braid bench args...
	local name=$1; shift
	local out
	out=$("$BRAID" bench -m "$MODEL" -p "$P" -n "$N" -r 1 --json "$@" 2>/dev/null) || { echo "{\"round\":$r,\"name\":\"$name\",\"error\":true}"; return; }
	python3 -c '
import json,sys
x=json.loads(sys.argv[1])[0]
print(json.dumps({"round":int(sys.argv[2]),"name":sys.argv[3],"pp_tps":x["prefill_tps_median"],"tg_tps":x["decode_tps_median"]}))' "$out" "$r" "$name"
}
RPC=127.0.0.1:50071,127.0.0.1:50072
for r in $(seq 1 "$RUNS"); do
	llama "llama.cpp layer, 2 rpc-servers x 1 thread" --rpc "$RPC" -ngl 99 -sm layer -t 1
	braid "braid layer, 2 ranks x 1 thread" -t 1 --workers 127.0.0.1:50081 --split layer
	llama "llama.cpp tensor, 2 rpc-servers x 1 thread" --rpc "$RPC" -ngl 99 -sm tensor -t 1
	braid "braid tensor, 2 ranks x 1 thread" -t 1 --workers 127.0.0.1:50081 --split tensor
	braid "braid tensor, 3 ranks x 1 thread (oversubscribed)" -t 1 --workers 127.0.0.1:50081,127.0.0.1:50082 --split tensor
	llama "llama.cpp tensor, 3 rpc-servers x 1 thread (oversubscribed)" --rpc "$RPC,127.0.0.1:50073" -ngl 99 -sm tensor -t 1
	# Pipelining: 4 sequences decoding together (tg_tps is their aggregate).
	braid "braid layer, 2 ranks x 1 thread, 4 sequences" -t 1 --workers 127.0.0.1:50081 --split layer -np 4
	braid "braid single node, 2 threads" -t 2
	llama "llama.cpp single node, 2 threads" -t 2
done
