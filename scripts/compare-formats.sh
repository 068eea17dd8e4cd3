#!/usr/bin/env bash
# Decode bandwidth per weight format at one thread: the matrix-vector
# product of a matrix well beyond the last-level cache (MIB MiB of weights,
# 4096 values a row) in each format, braid's BenchmarkDecodeFormats beside
# llama.cpp's own MUL_MAT (test-backend-ops perf, the same shapes through
# --test-file), interleaved format by format, round by round. Prints GB/s of
# weight bytes (medians of ROUNDS with ranges), braid/llama.cpp, and each
# format's share of the same engine's Q4_K figure.
#
#   LLAMA_CPP_BIN=/path/to/llama.cpp/build/bin scripts/compare-formats.sh
#
# Needs an existing llama.cpp build with test-backend-ops (never built
# here); without LLAMA_CPP_BIN only braid is measured. The op and type
# numbers of the test file come from that build's ggml.h: LLAMA_CPP_SRC, else
# the source directory named by the CMakeCache.txt next to LLAMA_CPP_BIN.
# test-backend-ops runs nproc/2 threads; OMP_THREAD_LIMIT=1 holds an OpenMP
# build to one (the script refuses a build without OpenMP when nproc > 3).
#
# Env: ROUNDS (5), MIB (128), FORMATS ("q4_K q6_K q5_K q8_0 iq4_xs mxfp4
# f16"), BENCHTIME (braid iterations per measurement, 20), NICE (-20 when
# root, else 0), BASE_TEST (a kernels test binary built from another commit,
# `go test -c ./internal/kernels/`: measured in the same rounds as a
# "braid before" column, for A/B of a kernel change).
set -euo pipefail
ROUNDS=${ROUNDS:-5} MIB=${MIB:-128} BENCHTIME=${BENCHTIME:-20}
FORMATS=${FORMATS:-"q4_K q6_K q5_K q8_0 iq4_xs mxfp4 f16"}
NICE=${NICE:-$([ "$(id -u)" = 0 ] && echo -20 || echo 0)}
cd "$(dirname "$0")/.."
out=$(mktemp -d)

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //' || uname -m), $(nproc) cpus"
lscpu 2>/dev/null | grep -E '^(L2|L3) cache' || true
echo "simd: $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512bw|avx512_vnni|avx512vnni|fma|f16c|asimd|asimddp|i8mm|sve)$' | tr '\n' ' ')"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"

go test -c -o "$out/kernels.test" ./internal/kernels/

# ggml type number, block size, bytes per block.
declare -A GGML_NAME=([q4_K]=Q4_K [q6_K]=Q6_K [q5_K]=Q5_K [q8_0]=Q8_0 [iq4_xs]=IQ4_XS [mxfp4]=MXFP4 [f16]=F16 [q4_0]=Q4_0 [bf16]=BF16)
declare -A BLOCK=([q4_K]="256 144" [q6_K]="256 210" [q5_K]="256 176" [q8_0]="32 34" [iq4_xs]="256 136" [mxfp4]="32 17" [f16]="1 2" [q4_0]="32 18" [bf16]="1 2")
for t in $FORMATS; do
	[ -n "${BLOCK[$t]:-}" ] || { echo "FORMATS: unknown format $t (known: ${!BLOCK[*]})" >&2; exit 2; }
done
rows_of() { # the shape decodeShape in format_bench_linux_test.go picks
	read -r bs ts <<<"${BLOCK[$1]}"
	local rb=$((4096 / bs * ts))
	echo $(((MIB << 20) / rb / 64 * 64))
}

llama=""
if [ -n "${LLAMA_CPP_BIN:-}" ]; then
	tbo="$LLAMA_CPP_BIN/test-backend-ops"
	[ -x "$tbo" ] || { echo "LLAMA_CPP_BIN: no test-backend-ops in $LLAMA_CPP_BIN" >&2; exit 2; }
	src=${LLAMA_CPP_SRC:-}
	if [ -z "$src" ] && [ -f "$LLAMA_CPP_BIN/../CMakeCache.txt" ]; then
		src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$LLAMA_CPP_BIN/../CMakeCache.txt")
	fi
	hdr="$src/ggml/include/ggml.h"
	[ -f "$hdr" ] || { echo "no ggml.h at '$hdr': set LLAMA_CPP_SRC to the llama.cpp source tree of this build" >&2; exit 2; }
	if [ "$(nproc)" -gt 3 ] && ! ldd "$tbo" 2>/dev/null | grep -q gomp; then
		echo "test-backend-ops is not built with OpenMP: it would run $(($(nproc) / 2)) threads, not 1" >&2
		exit 2
	fi
	# GGML_OP_MUL_MAT counts the entries of enum ggml_op; the types have
	# explicit values.
	op=$(awk '/^[ \t]*enum ggml_op {/{on=1;n=0;next} on&&/^[ \t]*};/{exit}
		on{sub(/\/\/.*/,""); gsub(/[ \t,]/,""); if($0=="")next; split($0,a,"="); if(a[2]!="")n=a[2]+0;
		if(a[1]=="GGML_OP_MUL_MAT"){print n; exit} n++}' "$hdr")
	[ -n "$op" ] || { echo "no GGML_OP_MUL_MAT in $hdr" >&2; exit 2; }
	for t in $FORMATS; do
		ty=$(sed -n "s/^[ \t]*GGML_TYPE_${GGML_NAME[$t]}[ \t]*=[ \t]*\([0-9]*\).*/\1/p" "$hdr")
		[ -n "$ty" ] || { echo "no GGML_TYPE_${GGML_NAME[$t]} in $hdr" >&2; exit 2; }
		read -r bs ts <<<"${BLOCK[$t]}"
		m=$(rows_of "$t") k=4096 rb=$((4096 / bs * ts))
		# dst f32 [m]; src0 type [k, m] with strides; src1 f32 [k].
		echo "$op 0 $m 1 1 1 0 2 $ty $k $m 1 1 $ts $rb $((rb * m)) $((rb * m)) 0 $k 1 1 1 4 $((4 * k)) $((4 * k)) $((4 * k)) decode_$t" >"$out/tf_$t.txt"
	done
	llama=$tbo
	echo "llama.cpp: $tbo (OMP_THREAD_LIMIT=1)"
	grep -E '^(GGML_NATIVE|GGML_AVX512[A-Z0-9_]*|GGML_AMX[A-Z0-9_]*|GGML_OPENMP|CMAKE_BUILD_TYPE):' "$LLAMA_CPP_BIN/../CMakeCache.txt" 2>/dev/null | tr '\n' ' ' || true
	echo
fi

if [ -n "${BASE_TEST:-}" ]; then
	[ -x "$BASE_TEST" ] || { echo "BASE_TEST=$BASE_TEST: not an executable test binary" >&2; exit 2; }
	"$BASE_TEST" -test.list 'DecodeFormats' | grep -q DecodeFormats ||
		{ echo "BASE_TEST=$BASE_TEST has no BenchmarkDecodeFormats" >&2; exit 2; }
fi

for r in $(seq 1 "$ROUNDS"); do
	echo "round $r/$ROUNDS (load $(cut -d' ' -f1 /proc/loadavg 2>/dev/null))" >&2
	BRAID_THREADS=1 nice -n "$NICE" "$out/kernels.test" -test.run XXX -test.bench 'MemRead' -test.benchtime 3x >>"$out/memread.txt"
	for t in $FORMATS; do
		if [ -n "${BASE_TEST:-}" ]; then
			BRAID_THREADS=1 BRAID_BENCH_MIB=$MIB nice -n "$NICE" "$BASE_TEST" -test.run XXX \
				-test.bench "DecodeFormats/Cold/${GGML_NAME[$t]}/" -test.benchtime "${BENCHTIME}x" >>"$out/base.txt"
		fi
		BRAID_THREADS=1 BRAID_BENCH_MIB=$MIB nice -n "$NICE" "$out/kernels.test" -test.run XXX \
			-test.bench "DecodeFormats/Cold/${GGML_NAME[$t]}/" -test.benchtime "${BENCHTIME}x" >>"$out/braid.txt"
		if [ -n "$llama" ]; then
			OMP_THREAD_LIMIT=1 nice -n "$NICE" "$llama" perf -b CPU -o MUL_MAT --test-file "$out/tf_$t.txt" 2>&1 |
				grep 'MUL_MAT(' >>"$out/llama.txt" || echo "llama.cpp: no result for $t" >&2
		fi
	done
done

python3 - "$out" "$MIB" "$FORMATS" <<'PY'
import re, statistics, sys
out, mib, formats = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
names = {"q4_K": "Q4_K", "q6_K": "Q6_K", "q5_K": "Q5_K", "q8_0": "Q8_0", "iq4_xs": "IQ4_XS", "mxfp4": "MXFP4", "f16": "F16", "q4_0": "Q4_0", "bf16": "BF16"}
block = {"q4_K": (256, 144), "q6_K": (256, 210), "q5_K": (256, 176), "q8_0": (32, 34), "iq4_xs": (256, 136), "mxfp4": (32, 17), "f16": (1, 2), "q4_0": (32, 18), "bf16": (1, 2)}
def stat(xs): return statistics.median(xs), min(xs), max(xs)
def fmt(s): return f"{s[0]:.1f} [{s[1]:.1f}-{s[2]:.1f}]"
mem = [float(m) for m in re.findall(r"([\d.]+) GB/s", open(f"{out}/memread.txt").read())]
print(f"\nread bandwidth, 1 thread (BenchmarkMemRead, 2 GiB, median [range] of {len(mem)}): {fmt(stat(mem))} GB/s")
braid, base, llama, shape = {}, {}, {}, {}
braid_cpu, base_cpu = {}, {}
def read_braid(path, into, cpu):
    try:
        lines = open(path).readlines()
    except FileNotFoundError:
        return
    for line in lines:
        m = re.match(r"BenchmarkDecodeFormats/Cold/(\w+)/(\d+)x(\d+)\S*\s+\d+\s+[\d.]+ ns/op.*?([\d.]+) GB/s", line)
        if m:
            into.setdefault(m[1], []).append(float(m[4]))
            shape[m[1]] = (int(m[2]), int(m[3]))
            c = re.search(r"([\d.]+) cpu-GB/s", line)
            if c:
                cpu.setdefault(m[1], []).append(float(c[1]))
read_braid(f"{out}/braid.txt", braid, braid_cpu)
read_braid(f"{out}/base.txt", base, base_cpu)
try:
    for line in open(f"{out}/llama.txt"):
        m = re.search(r"name=decode_(\w+),.*?([\d.]+) us/run", line)
        if m:
            llama.setdefault(names[m[1]], []).append(float(m[2]))
except FileNotFoundError:
    pass
def share(d, n):
    # median [range] over rounds of this format's GB/s over Q4_K's in the
    # same round: the rounds share the machine's state, so the ratio is
    # steadier than the ratio of medians
    if n not in d or "Q4_K" not in d:
        return "-"
    rs = [a / b * 100 for a, b in zip(d[n], d["Q4_K"])]
    return f"{statistics.median(rs):.0f} % [{min(rs):.0f}-{max(rs):.0f}]"
bcol = "| braid before GB/s | before, share of its Q4_K " if base else ""
print(f"\n| format | rows x cols | MiB {bcol}| braid GB/s | llama.cpp GB/s | braid/llama.cpp | braid, share of its Q4_K | llama.cpp, share of its Q4_K |")
print("|---|---|---|" + ("---|---|" if base else "") + "---|---|---|---|---|")
rows = []
for t in formats:
    n = names[t]
    if n not in braid:
        print(f"| {n} | - | - | no result | | | | |")
        continue
    r, c = shape[n]
    bs, ts = block[t]
    size = r * c // bs * ts
    b = stat(braid[n])
    if n in llama:
        llama[n] = [size / us / 1e3 for us in llama[n]]
    l = stat(llama[n]) if n in llama else None
    rows.append((n, r, c, size, b, l))
for n, r, c, size, b, l in rows:
    ls = fmt(l) if l else "-"
    ratio = "-"
    if l:
        rs = [a / c_ for a, c_ in zip(braid[n], llama[n])]
        ratio = f"{statistics.median(rs):.2f}x [{min(rs):.2f}-{max(rs):.2f}]"
    bshare, lshare = share(braid, n), share(llama, n)
    before = ""
    if base:
        before = (f"{fmt(stat(base[n]))} | {share(base, n)} | ") if n in base else "- | - | "
    print(f"| {n} | {r}x{c} | {size / 2**20:.0f} | {before}{fmt(b)} | {ls} | {ratio} | {bshare} | {lshare} |")
# The same braid runs by the thread's CPU time (cpu-GB/s): on a shared
# machine the wall figures count the time other processes held the core.
print("\nbraid by thread CPU time (GB/s of weights per CPU second of the benchmark thread):\n")
print("| format | " + ("before | before, share of Q4_K | " if base_cpu else "") + "braid | share of Q4_K |")
print("|---|" + ("---|---|" if base_cpu else "") + "---|---|")
for n, *_ in rows:
    if n not in braid_cpu:
        continue
    before = f"{fmt(stat(base_cpu[n]))} | {share(base_cpu, n)} | " if n in base_cpu else ("- | - | " if base_cpu else "")
    print(f"| {n} | {before}{fmt(stat(braid_cpu[n]))} | {share(braid_cpu, n)} |")
PY
echo "raw results: $out"
