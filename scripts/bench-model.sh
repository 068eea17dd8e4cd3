#!/usr/bin/env bash
# One model, every way this project quotes it, A/B interleaved round by
# round so the shared machine's drift hits every configuration alike:
#
#   braid single node at 1 and 2 threads   vs   llama-bench at 1 and 2 threads
#   braid tensor split over 2 ranks of 1 thread (coordinator + one worker)
#
# and, per round, the ratios braid/llama.cpp (same threads) and tensor
# split/single node (same total threads); then medians with their range.
# Needs an existing llama.cpp build (never built here):
#
#   LLAMA_CPP_BIN=/path/to/llama.cpp/build/bin MODEL=/dev/shm/model.gguf ROUNDS=5 scripts/bench-model.sh
#
# The GGUF is measured from tmpfs (copied to /dev/shm when it is elsewhere)
# so that neither engine's weights can be paged out mid-run, and a llama.cpp
# build without this CPU's SIMD extensions is refused (scripts/lib/baseline.sh). Env: P (prompt tokens, 128), N (generated, 32), ROUNDS
# (5), SPLIT (1: also the 2-rank tensor split; 0: skip), BRAID (./bin/braid),
# LOAD_MAX (unset: off; else each run waits until the 1-minute load average
# is below it, at most LOAD_WAIT seconds, 120). The load average at the
# start of every run is reported with the figures either way. BASE_ENV
# (e.g. BASE_ENV=BRAID_REPACK=off) also runs braid under that environment
# in every round, beside the others, and reports braid against it.
# BRAID_ARGS and LLAMA_ARGS add flags to every braid bench and llama-bench
# run: a model larger than tmpfs allows (BASELINE_ALLOW_DISK=1) is held
# resident by LLAMA_ARGS="-lm none" (llama.cpp reads it into anonymous memory;
# builds before --load-mode: "-mmp 0")
# and by braid's repacked copies (BRAID_ARGS="--load-mode read" where the
# machine has room for the file and its repacked copy).
set -euo pipefail
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the bin directory of a llama.cpp build}"
MODEL=$(realpath "${MODEL:?set MODEL to a GGUF}")
ROUNDS=${ROUNDS:-5} P=${P:-128} N=${N:-32} SPLIT=${SPLIT:-1}
cd "$(dirname "$0")/.."
. scripts/lib/baseline.sh
# The build must use every SIMD extension of this CPU, and the GGUF is
# measured from tmpfs (copied there when it is not): see scripts/lib/baseline.sh.
baseline_check "$LLAMA_CPP_BIN"
MODEL=$(baseline_resident "$MODEL")
BRAID=${BRAID:-./bin/braid}
[ -x "$BRAID" ] || go build -buildvcs=true -o "$BRAID" ./cmd/braid
out=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
# The worker's port is a free one, not a fixed number: another run of this
# script on the machine would otherwise serve its splits from our worker.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
if [ "$SPLIT" = 1 ]; then
	"$BRAID" worker --listen "127.0.0.1:$port" -t 1 >"$out/worker.log" 2>&1 &
	pids+=($!)
	sleep 2
fi
export LD_LIBRARY_PATH="$LLAMA_CPP_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# wait_load holds the next run while the machine is busier than LOAD_MAX,
# then logs the load average the run starts at.
wait_load() {
	local t0=$SECONDS
	if [ -n "${LOAD_MAX:-}" ]; then
		while awk -v m="$LOAD_MAX" '{exit !($1 >= m)}' /proc/loadavg && [ $((SECONDS - t0)) -lt "${LOAD_WAIT:-120}" ]; do
			sleep 5
		done
	fi
	cut -d' ' -f1 /proc/loadavg >>"$out/load"
}
for r in $(seq 1 "$ROUNDS"); do
	for t in 1 2; do
		wait_load
		/usr/bin/time -f %M -o "$out/braid.t$t.$r.rss" "$BRAID" bench -m "$MODEL" -p "$P" -n "$N" -r 1 -t "$t" ${BRAID_ARGS:-} --json >"$out/braid.t$t.$r.json" 2>>"$out/braid.log"
		if [ -n "${BASE_ENV:-}" ]; then
			wait_load
			env "$BASE_ENV" "$BRAID" bench -m "$MODEL" -p "$P" -n "$N" -r 1 -t "$t" ${BRAID_ARGS:-} --json >"$out/base.t$t.$r.json" 2>>"$out/braid.log"
		fi
		wait_load
		/usr/bin/time -f %M -o "$out/llama.t$t.$r.rss" "$LLAMA_CPP_BIN/llama-bench" -m "$MODEL" -p "$P" -n "$N" -r 1 -t "$t" ${LLAMA_ARGS:-} -o json >"$out/llama.t$t.$r.json" 2>>"$out/llama.log"
	done
	if [ "$SPLIT" = 1 ]; then
		wait_load
		"$BRAID" bench -m "$MODEL" -p "$P" -n "$N" -r 1 -t 1 ${BRAID_ARGS:-} --workers "127.0.0.1:$port" --split tensor --json >"$out/split.$r.json" 2>>"$out/split.log"
	fi
	echo "round $r done" >&2
done
python3 - "$out" "$ROUNDS" "$SPLIT" "${BASE_ENV:-}" <<'PY'
import json, statistics, sys, glob
out, rounds, split, base_env = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
def braid(name, r):
    d = json.load(open(f"{out}/{name}.{r}.json"))[0]
    return d["prefill_tps_median"], d["decode_tps_median"]
def llama(t, r):
    runs = json.load(open(f"{out}/llama.t{t}.{r}.json"))
    pp = [x["avg_ts"] for x in runs if x["n_prompt"] > 0 and x["n_gen"] == 0]
    tg = [x["avg_ts"] for x in runs if x["n_gen"] > 0 and x["n_prompt"] == 0]
    return pp[0], tg[0]
def rss(name, r):
    return int(open(f"{out}/{name}.{r}.rss").read().split()[-1]) / 1024
def show(label, xs, unit=""):
    print(f"| {label} | {statistics.median(xs):.2f}{unit} [{min(xs):.2f}-{max(xs):.2f}] |")
print("| figure | median [range] over %d rounds |" % rounds)
print("|---|---|")
for t in (1, 2):
    b = [braid(f"braid.t{t}", r) for r in range(1, rounds + 1)]
    l = [llama(t, r) for r in range(1, rounds + 1)]
    for i, what in ((0, "prefill"), (1, "decode")):
        show(f"braid {what} tok/s, {t} thread(s)", [x[i] for x in b])
        show(f"llama.cpp {what} tok/s, {t} thread(s)", [x[i] for x in l])
        show(f"braid/llama.cpp {what}, {t} thread(s) (ratio per round)", [b[k][i] / l[k][i] for k in range(rounds)], "x")
        if base_env:
            e = [braid(f"base.t{t}", r) for r in range(1, rounds + 1)]
            show(f"braid {base_env} {what} tok/s, {t} thread(s)", [x[i] for x in e])
            show(f"braid / braid {base_env} {what}, {t} thread(s) (ratio per round)", [b[k][i] / e[k][i] for k in range(rounds)], "x")
    show(f"braid peak RSS MiB, {t} thread(s)", [rss(f"braid.t{t}", r) for r in range(1, rounds + 1)])
    show(f"llama.cpp peak RSS MiB, {t} thread(s)", [rss(f"llama.t{t}", r) for r in range(1, rounds + 1)])
show("1-minute load average at the runs' starts", [float(x) for x in open(f"{out}/load").read().split()])
if split:
    s = [braid("split", r) for r in range(1, rounds + 1)]
    one = [braid("braid.t2", r) for r in range(1, rounds + 1)]
    for i, what in ((0, "prefill"), (1, "decode")):
        show(f"braid tensor split 2x1 thread {what} tok/s", [x[i] for x in s])
        show(f"tensor split / single node 2 threads, {what} (ratio per round)", [s[k][i] / one[k][i] for k in range(rounds)], "x")
PY
echo "raw results: $out" >&2
