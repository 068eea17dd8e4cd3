#!/usr/bin/env bash
# Regenerates internal/model/testdata/buildflips: the positions of the
# shared quantized DSA models (glm-dsa Q8_0, Q4_K_M) where llama.cpp built
# for this machine disagrees with the shared reference logits, which another
# build of the same commit made (../shared/testdata/models/glm-dsa/README.md:
# an AVX-512 machine). The indexer's top-k is a discrete choice: where two
# keys nearly tie, the two builds' summation orders pick different keys and
# the logits move far more than rounding. TestGoldenLogits forgives a
# position of those models only where it is listed here, and only if braid
# then agrees with this build's row (kept beside the list).
#
#   LLAMA_CPP_BIN=/path/llama.cpp/build/bin LLAMA_CPP_SRC=/path/llama.cpp scripts/ref-buildflips.sh
#
# Each model is decoded as the shared references were (the 32-token sequence
# in one batch, every position's logits, then 32 greedy steps one token at a
# time, F16 KV cache, 2 threads; scripts/refdump/refdump.cpp), and its greedy
# tokens must equal the reference's, so that every greedy row is the logits
# behind the same history. A row is listed when its largest |diff| exceeds
# 2e-2 of the reference row's spread (TestGoldenLogits' quantized tolerance).
# Outputs per NAME: NAME.json ({"build", "prefill": [positions], "greedy":
# [steps]}) and NAME.rows.f32 (those rows of this build, prefill rows first).
set -euo pipefail
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the llama.cpp build directory holding libllama.so}"
: "${LLAMA_CPP_SRC:?set LLAMA_CPP_SRC to the llama.cpp source tree of that build}"
MODELS=${MODELS:-"glm-dsa/tiny-glm-dsa-Q8_0 glm-dsa/tiny-glm-dsa-Q4_K_M"}
TOKENS=1,39,460,112,14,255,240,120,164,303,255,249,198,247,190,88,224,337,435,361,291,207,499,210,362,386,418,343,340,212,286,186
cd "$(dirname "$0")/.."
shared=$(realpath ../shared/testdata/models)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g++ -O2 -std=c++17 -o "$tmp/refdump" scripts/refdump/refdump.cpp \
	-I"$LLAMA_CPP_SRC/include" -I"$LLAMA_CPP_SRC/ggml/include" \
	-L"$LLAMA_CPP_BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$LLAMA_CPP_BIN"
out=internal/model/testdata/buildflips
mkdir -p "$out"
build="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo 'AVX2, no AVX-512'), $(cd "$LLAMA_CPP_SRC" && git rev-parse --short HEAD 2>/dev/null || echo 'unknown commit')"
for m in $MODELS; do
	name=$(basename "$m")
	"$tmp/refdump" "$shared/$m.gguf" "$tmp/$name" 2 f16 32 1 "$TOKENS" 2> "$tmp/$name.log" || { cat "$tmp/$name.log" >&2; exit 1; }
	python3 - "$shared/$m" "$tmp/$name" "$out/$name" "$build" <<'PY'
import json, struct, sys
ref, mine, dst, build = sys.argv[1:]
def rows(path, v):
    d = open(path, 'rb').read()
    x = struct.unpack('<%df' % (len(d) // 4), d)
    return [x[i:i + v] for i in range(0, len(x), v)]
rj, mj = json.load(open(ref + '.json')), json.load(open(mine + '.json'))
if rj['greedy_32'] != mj['greedy']:
    sys.exit('%s: this build chose other greedy tokens %s than the reference %s; the greedy rows are not comparable' % (ref, mj['greedy'], rj['greedy_32']))
V = rj['n_vocab']
flips, kept = {'build': build, 'prefill': [], 'greedy': []}, []
for kind, suffix in (('prefill', '.logits.f32'), ('greedy', '.greedy_logits.f32')):
    for i, (a, b) in enumerate(zip(rows(ref + suffix, V), rows(mine + suffix, V))):
        spread = max(a) - min(a)
        if max(abs(x - y) for x, y in zip(a, b)) > 2e-2 * spread:
            flips[kind].append(i)
            kept.append(b)
json.dump(flips, open(dst + '.json', 'w'))
open(dst + '.rows.f32', 'wb').write(b''.join(struct.pack('<%df' % V, *r) for r in kept))
print(dst, json.dumps(flips))
PY
done
