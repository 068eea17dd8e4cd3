#!/usr/bin/env bash
# Cold load: wall time from starting `braid bench` (one 1-token prefill
# after its warm-up) with an empty page cache to its end, single node vs a
# 3-rank tensor split over two fresh local workers (each rank reads only its
# slices from its local copy). Needs root (drop_caches). A/B interleaved.
#
#   MODEL=model.gguf RUNS=5 scripts/cluster-coldload.sh
set -euo pipefail
MODEL=${MODEL:?set MODEL to a GGUF}
RUNS=${RUNS:-5}
BRAID=${BRAID:-./bin/braid}
pids=()
stopw() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap stopw EXIT
cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }
"$BRAID" bench -m "$MODEL" -p 1 -n 0 -r 1 -t 1 >/dev/null 2>&1 # the model hash, once
for r in $(seq 1 "$RUNS"); do
	cold
	s=$(date +%s.%N)
	"$BRAID" bench -m "$MODEL" -p 1 -n 0 -r 1 -t 2 >/dev/null 2>&1
	e=$(date +%s.%N)
	echo "{\"round\":$r,\"name\":\"single node\",\"seconds\":$(printf "%.3f" "$(echo "$e - $s" | bc)")}"
	"$BRAID" worker --listen 127.0.0.1:50091 -t 1 >/dev/null 2>&1 & pids+=($!)
	"$BRAID" worker --listen 127.0.0.1:50092 -t 1 >/dev/null 2>&1 & pids+=($!)
	for port in 50091 50092; do # wait until both listen
		for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
	done
	cold
	s=$(date +%s.%N)
	"$BRAID" bench -m "$MODEL" -p 1 -n 0 -r 1 -t 1 --workers 127.0.0.1:50091,127.0.0.1:50092 --split tensor >/dev/null 2>&1
	e=$(date +%s.%N)
	echo "{\"round\":$r,\"name\":\"tensor split, 3 ranks\",\"seconds\":$(printf "%.3f" "$(echo "$e - $s" | bc)")}"
	stopw
done
