#!/usr/bin/env bash
# plan-vs-measured.sh: braid plan's predicted decode and prefill (the
# performance model of issue 27, on this node as `braid plan --calibrate`
# measures it) against braid bench's measured, for each model given and
# every split that runs on this machine: one rank at 1 and at all threads,
# and 2 and 3 local ranks of one thread each (braid worker processes),
# tensor and layer split. The ranks share this machine's cores and memory
# bandwidth, and the model knows it (ranks of one host share its rate).
#
#   MODELS="/dev/shm/llama-1b.gguf /dev/shm/tiny.gguf" RUNS=5 scripts/plan-vs-measured.sh
#
# Prints a Markdown table (medians of RUNS runs with their range, the
# load average before each model) and, unless DOC=0, writes it into
# docs/PERFORMANCE.md between the plan-vs-measured markers. P and N are
# the prompt and generated tokens of each run (bench -p, -n); the
# prediction takes decode at context N/2 (the mean over the run).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${MODELS:=}"
[ -n "$MODELS" ] || [ -n "${REPREDICT:-}" ] || { echo "set MODELS to the GGUF files to check (braid genmodel --preset NAME)" >&2; exit 2; }
RUNS=${RUNS:-5}
P=${P:-64}
N=${N:-32}
DOC=${DOC:-1}
BRAID=${BRAID:-./bin/braid}
[ -x "$BRAID" ] || go build -o "$BRAID" ./cmd/braid
ALL=$(nproc)

if [ -n "${REPREDICT:-}" ]; then
	# Predict again with this build (the cached calibration of the run
	# that measured), keeping the measured columns of the rows in REPREDICT.
	rows=$REPREDICT
	new=$(mktemp)
	while IFS= read -r line; do
		args=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("\t".join([r["path"], str(r["threads"]), r["nodes"], r["split"]]))' "$line")
		IFS=$'\t' read -r m t nodes split <<<"$args"
		pred=$("$BRAID" plan -m "$m" --nodes "$nodes" -t "$t" -c $((N / 2)) --prompt "$P" --streams 1 --json)
		python3 - "$line" "$split" "$pred" >>"$new" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); split = sys.argv[2]
p = [x for x in json.loads(sys.argv[3])["splits"] if x["split"] == split and not x.get("spec_rates") and x.get("experts") != "whole"][0]
if p.get("feasible"):
    r["pred_decode"], r["pred_prefill"] = p["decode_tps_per_stream"][0], p["prefill_tps"]
print(json.dumps(r))
PY
	done <"$rows"
	cp "$new" "$rows"
	MODELS=
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
[ -z "$MODELS" ] || {
# The loopback links between local ranks, then this node's kernels.
nb=$(mktemp)
nice "$BRAID" netbench --local 2 --json --max-bytes 1M --budget 64M >"$nb"
nice "$BRAID" plan --calibrate -t "$ALL" --netbench "$nb" >&2
W1=127.0.0.1:${PORT1:-50181}
W2=127.0.0.1:${PORT2:-50182}
nice "$BRAID" worker --listen "$W1" -t 1 >/dev/null 2>&1 & pids+=($!)
nice "$BRAID" worker --listen "$W2" -t 1 >/dev/null 2>&1 & pids+=($!)
sleep 2

rows=${ROWS:-$(mktemp)}
: >"$rows"

for m in $MODELS; do
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	# name | threads | nodes | split row in plan | bench flags
	while IFS='|' read -r name t nodes split flags; do
		pred=$(nice "$BRAID" plan -m "$m" --nodes "$nodes" -t "$t" -c $((N / 2)) --prompt "$P" --streams 1 --json)
		meas=$(nice "$BRAID" bench -m "$m" -p "$P" -n "$N" -r "$RUNS" -t "$t" $flags --json 2>/dev/null) || meas=null
		python3 - "$m" "$name" "$split" "$load" "$pred" "$meas" "$t" "$nodes" >>"$rows" <<'PY'
import json, os, sys
m, name, split, load, pred, meas, t, nodes = sys.argv[1:]
rows = [r for r in json.loads(pred)["splits"] if r["split"] == split and not r.get("spec_rates") and r.get("experts") != "whole"]
p = rows[0] if rows else {}
x = (json.loads(meas) or [None])[0] if meas != "null" else None
out = {"model": os.path.basename(m), "path": m, "config": name, "load": load, "threads": int(t), "nodes": nodes, "split": split,
       "pred_decode": (p.get("decode_tps_per_stream") or [0])[0], "pred_prefill": p.get("prefill_tps") or 0}
if not p.get("feasible"):
    out["why"] = p.get("why", "no such split")
if x:
    out.update(meas_decode=x["decode_tps_median"], decode_lo=x["decode_tps_min"], decode_hi=x["decode_tps_max"],
               meas_prefill=x["prefill_tps_median"], prefill_lo=x["prefill_tps_min"], prefill_hi=x["prefill_tps_max"])
print(json.dumps(out))
PY
	done <<EOF2
single, 1 thread|1|local|single|
single, $ALL threads|$ALL|local|single|
tensor, 2 ranks x 1 thread|1|2xlocal|tp 2|--workers $W1 --split tensor
layer, 2 ranks x 1 thread|1|2xlocal|pp 2|--workers $W1 --split layer
tensor, 3 ranks x 1 thread|1|3xlocal|tp 3|--workers $W1,$W2 --split tensor
layer, 3 ranks x 1 thread|1|3xlocal|pp 3|--workers $W1,$W2 --split layer
EOF2
done
}

table=$(python3 - "$rows" "$RUNS" "$P" "$N" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
runs, p, n = sys.argv[2:]
print(f"| model | split | load | decode predicted | decode measured (median [range] of {runs}) | pred/meas | prefill predicted | prefill measured | pred/meas |")
print("|---|---|---|---|---|---|---|---|---|")
within = total = 0
for r in rows:
    if "why" in r:
        print(f"| {r['model']} | {r['config']} | {r['load']} | - | does not run: {r['why']} | - | - | - | - |")
        continue
    if "meas_decode" not in r:
        print(f"| {r['model']} | {r['config']} | {r['load']} | {r['pred_decode']:.1f} | did not run | - | {r['pred_prefill']:.1f} | - | - |")
        continue
    rd = r["pred_decode"] / r["meas_decode"]
    rp = r["pred_prefill"] / r["meas_prefill"]
    for q in (rd, rp):
        total += 1
        within += abs(q - 1) <= 0.2
    mark = lambda q: f"**{q:.2f}**" if abs(q - 1) > 0.2 else f"{q:.2f}"
    print(f"| {r['model']} | {r['config']} | {r['load']} | {r['pred_decode']:.1f} | {r['meas_decode']:.1f} [{r['decode_lo']:.1f}-{r['decode_hi']:.1f}] | {mark(rd)} | "
          f"{r['pred_prefill']:.1f} | {r['meas_prefill']:.1f} [{r['prefill_lo']:.1f}-{r['prefill_hi']:.1f}] | {mark(rp)} |")
print()
print(f"{within} of {total} predictions within +-20 % (bold: outside); bench -p {p} -n {n}, prediction at context {int(n)//2}.")
PY
)
echo "$table"
if [ "$DOC" = 1 ]; then
	python3 - docs/PERFORMANCE.md "$table" "$(date -u +%Y-%m-%dT%H:%MZ)" "$(git rev-parse --short HEAD)" <<'PY'
import sys
path, table, when, rev = sys.argv[1:]
doc = open(path).read()
b, e = "<!-- plan-vs-measured:begin -->", "<!-- plan-vs-measured:end -->"
if b not in doc or e not in doc:
    sys.exit(f"{path}: no {b} ... {e} markers")
head, rest = doc.split(b, 1)
_, tail = rest.split(e, 1)
body = f"\n_Written by scripts/plan-vs-measured.sh at {when}, braid {rev}._\n\n{table}\n"
open(path, "w").write(head + b + body + e + tail)
PY
fi
