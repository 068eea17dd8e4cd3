#!/usr/bin/env bash
# Regenerates internal/model/testdata/variants: llama.cpp's logits for the
# reference variants of modelgen (modelgen.Variants: Qwen3.5 and GLM-5
# shapes the shared test models lack), which TestVariantLogits compares
# braid's with. Needs an existing llama.cpp build (never builds it):
#
#   LLAMA_CPP_BIN=/path/llama.cpp/build/bin LLAMA_CPP_SRC=/path/llama.cpp scripts/ref-variants.sh
#
# LLAMA_CPP_BIN holds libllama.so and libggml*.so; LLAMA_CPP_SRC is the
# source tree of the same commit (its include/ and ggml/include/ headers).
# scripts/refdump/refdump.cpp, our own program against llama.h, is compiled
# with g++ into a temporary directory. For each variant and file type
# (VARIANTS, TYPES) braid genmodel --variant writes the GGUF (modelgen
# writes it bit for bit the same at test time), and refdump decodes the
# shared test sequence (the 32 tokens of ../shared/testdata/models/README.md)
# in one batch on the CPU with THREADS threads (2), flash attention off and
# an F16 KV cache, keeping the logits of positions 3, 7, ..., 31, then 8
# greedy steps (own argmax) one token at a time. Outputs per NAME-TYPE:
# .logits.f32 (8 x vocab), .greedy_logits.f32 (8 x vocab), .json (tokens,
# rows, greedy ids and margins, settings).
#
# CHECK=1 also runs every file with 1 thread and reports the largest logit
# difference between the two builds' runs (a near-tie in the DSA top-k that
# flips between thread counts shows here).
set -euo pipefail
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the llama.cpp build directory holding libllama.so}"
: "${LLAMA_CPP_SRC:?set LLAMA_CPP_SRC to the llama.cpp source tree of that build}"
VARIANTS=${VARIANTS:-"glm-dsa-allfull-top3 qwen35-hv qwen35moe-hv"}
TYPES=${TYPES:-"F32 Q8_0"}
THREADS=${THREADS:-2}
TOKENS=1,39,460,112,14,255,240,120,164,303,255,249,198,247,190,88,224,337,435,361,291,207,499,210,362,386,418,343,340,212,286,186
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g++ -O2 -std=c++17 -o "$tmp/refdump" scripts/refdump/refdump.cpp \
	-I"$LLAMA_CPP_SRC/include" -I"$LLAMA_CPP_SRC/ggml/include" \
	-L"$LLAMA_CPP_BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$LLAMA_CPP_BIN"
go build -o "$tmp/braid" ./cmd/braid
out=internal/model/testdata/variants
mkdir -p "$out"
for v in $VARIANTS; do
	for t in $TYPES; do
		name="$v-$t"
		"$tmp/braid" genmodel --variant "$v" --type "$t" --out "$tmp/$name.gguf" > /dev/null
		"$tmp/refdump" "$tmp/$name.gguf" "$out/$name" "$THREADS" f16 8 4 "$TOKENS" 2> "$tmp/$name.log" ||
			{ cat "$tmp/$name.log" >&2; exit 1; }
		echo "$name: $(cat "$out/$name.json")"
		if [[ "${CHECK:-}" == 1 ]]; then
			"$tmp/refdump" "$tmp/$name.gguf" "$tmp/$name.t1" 1 f16 8 4 "$TOKENS" 2> /dev/null
			for f in logits greedy_logits; do
				if cmp -s "$out/$name.$f.f32" "$tmp/$name.t1.$f.f32"; then
					echo "  $f: 1 thread byte-identical"
				else
					echo "  $f: 1 thread differs"
				fi
			done
		fi
	done
done
