#!/usr/bin/env bash
# Regenerates internal/model/testdata/encoders: llama.cpp's pooled, unit
# length embeddings for modelgen's encoder variants (modelgen.
# EncoderVariants: bert and nomic-bert, mean, cls and last pooling), which
# TestEncoderReference compares braid's with. Needs an existing llama.cpp
# build (never builds it):
#
#   LLAMA_CPP_BIN=/path/llama.cpp/build/bin LLAMA_CPP_SRC=/path/llama.cpp scripts/ref-encoders.sh
#
# scripts/embdump/embdump.cpp, our own program against llama.h, is compiled
# with g++ into a temporary directory. For each variant and file type
# (VARIANTS, TYPES) braid genmodel --variant writes the GGUF (modelgen
# writes it bit for bit the same at test time) and embdump runs the texts
# of internal/model/testdata/encoders/texts.txt, each its own sequence, in
# one llama_decode on the CPU (THREADS threads, 2), flash attention off,
# writing NAME-TYPE.json: per text its ids (add_special) and vector.
set -euo pipefail
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the llama.cpp build directory holding libllama.so}"
: "${LLAMA_CPP_SRC:?set LLAMA_CPP_SRC to the llama.cpp source tree of that build}"
VARIANTS=${VARIANTS:-"bert-mean bert-cls nomic-bert-last"}
TYPES=${TYPES:-"F32 Q8_0"}
THREADS=${THREADS:-2}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g++ -O2 -std=c++17 -o "$tmp/embdump" scripts/embdump/embdump.cpp \
	-I"$LLAMA_CPP_SRC/include" -I"$LLAMA_CPP_SRC/ggml/include" \
	-L"$LLAMA_CPP_BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$LLAMA_CPP_BIN"
go build -o "$tmp/braid" ./cmd/braid
out=internal/model/testdata/encoders
for v in $VARIANTS; do
	for t in $TYPES; do
		name="$v-$t"
		"$tmp/braid" genmodel --variant "$v" --type "$t" --out "$tmp/$name.gguf" > /dev/null
		"$tmp/embdump" "$tmp/$name.gguf" "$THREADS" "$out/texts.txt" "$out/$name.json"
		echo "$name: $(wc -c < "$out/$name.json") bytes"
	done
done
