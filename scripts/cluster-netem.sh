#!/usr/bin/env bash
# Decode tokens/s and the communication share (braid bench --profile) of
# tensor and layer split with 50 µs of delay added per direction on every
# link (DELAY=0: no tc, plain veth): each rank in its own network namespace, one veth pair and /24 per
# edge (a switchless mesh), tc netem on both ends. Needs root and iproute2.
#
#   MODEL=model.gguf RANKS=2 DELAY=50us RUNS=5 scripts/cluster-netem.sh
set -euo pipefail
MODEL=$(realpath "${MODEL:?set MODEL to a GGUF}")
RANKS=${RANKS:-2}
DELAY=${DELAY:-50us}
RUNS=${RUNS:-5}
N=${N:-32}
BRAID=$(realpath "${BRAID:-./bin/braid}")
export BRAID_SECRET=${BRAID_SECRET:-netem-bench-secret}
ns() { echo "braidnm$1"; }
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for ((i = 0; i < RANKS; i++)); do ip netns del "$(ns $i)" 2>/dev/null || true; done
}
trap cleanup EXIT
for ((i = 0; i < RANKS; i++)); do ip netns add "$(ns $i)"; ip -n "$(ns $i)" link set lo up; done
# Edge a-b: 10.78.<edge>.1 on a, .2 on b.
declare -A addr
edge=0
for ((a = 0; a < RANKS; a++)); do
	for ((b = a + 1; b < RANKS; b++)); do
		edge=$((edge + 1))
		ip -n "$(ns $a)" link add "e$a$b" type veth peer name "e$b$a" netns "$(ns $b)"
		ip -n "$(ns $a)" addr add "10.78.$edge.1/24" dev "e$a$b"
		ip -n "$(ns $b)" addr add "10.78.$edge.2/24" dev "e$b$a"
		ip -n "$(ns $a)" link set "e$a$b" up
		ip -n "$(ns $b)" link set "e$b$a" up
		if [ "$DELAY" != 0 ]; then # DELAY=0: plain veth (kernels without sch_netem)
			tc -n "$(ns $a)" qdisc add dev "e$a$b" root netem delay "$DELAY"
			tc -n "$(ns $b)" qdisc add dev "e$b$a" root netem delay "$DELAY"
		fi
		addr[$a,$b]=10.78.$edge.2 # where a reaches b
		addr[$b,$a]=10.78.$edge.1
	done
done
# Workers: rank b listens on its address toward rank 0; a cluster file
# gives every pair its own address.
cf=$(mktemp)
{
	echo "[[rank]]"
	echo "model = \"$MODEL\""
	for ((b = 1; b < RANKS; b++)); do
		echo "[[rank]]"
		echo "addr = \"${addr[0,$b]}:7000\""
	done
	for ((a = 1; a < RANKS; a++)); do
		for ((b = a + 1; b < RANKS; b++)); do
			echo "[[link]]"
			echo "from = $a"
			echo "to = $b"
			echo "addr = \"${addr[$a,$b]}\""
		done
	done
} >"$cf"
for ((b = 1; b < RANKS; b++)); do
	ip netns exec "$(ns $b)" "$BRAID" worker --listen 0.0.0.0:7000 --data-listen 0.0.0.0:7001 -t 1 >/dev/null 2>&1 &
	pids+=($!)
done
sleep 2
echo "# ping rank 0 -> 1 (round trip):"
ip netns exec "$(ns 0)" ping -c 3 -q "${addr[0,1]}" 2>/dev/null | tail -1 || echo "(no ping here)"
for r in $(seq 1 "$RUNS"); do
	for split in layer tensor; do
		echo "## round $r split $split"
		ip netns exec "$(ns 0)" "$BRAID" bench -m "$MODEL" -p 0 -n "$N" -r 1 -t 1 --cluster "$cf" --split "$split" --profile 2>/dev/null |
			grep -E "stories|gguf|communication share|step [0-9]+ µs"
	done
done
