#!/usr/bin/env bash
# Regenerates internal/tokenizer/testdata/wpm/ids.json: llama.cpp's
# llama-tokenize ids for every text of internal/tokenizer/testdata/wpm/
# inputs.json (texts of our own) on the WordPiece vocabulary of modelgen's
# encoder variant bert-mean (braid genmodel --variant bert-mean writes it;
# the tokenizer test writes the same file at test time), once with
# add_special and parse_special (llama-tokenize's defaults) and once with
# neither (--no-bos --no-parse-special). TestWPMReference compares braid's
# ids with them. Needs an existing llama.cpp build (never builds it):
#
#   LLAMA_CPP_BIN=/path/llama.cpp/build/bin scripts/ref-wpm.sh
set -euo pipefail
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the llama.cpp build directory holding llama-tokenize}"
VARIANT=${VARIANT:-bert-mean}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/braid" ./cmd/braid
"$tmp/braid" genmodel --variant "$VARIANT" --type F32 --out "$tmp/vocab.gguf" > /dev/null
dir=internal/tokenizer/testdata/wpm
python3 - "$LLAMA_CPP_BIN/llama-tokenize" "$tmp" "$VARIANT" "$dir" <<'PY'
import json, subprocess, sys
tok, tmp, variant, d = sys.argv[1:]
texts = json.load(open(f"{d}/inputs.json", encoding="utf-8"))
def run(text, special):
    path = f"{tmp}/in.txt"
    open(path, "wb").write(text.encode("utf-8"))
    args = [tok, "-m", f"{tmp}/vocab.gguf", "-f", path, "--ids", "--log-disable"]
    if not special:
        args += ["--no-bos", "--no-parse-special"]
    out = subprocess.run(args, capture_output=True, check=True, text=True).stdout.strip().splitlines()[-1]
    return json.loads(out)
cases = [{"text": t, "special": run(t, True), "plain": run(t, False)} for t in texts]
with open(f"{d}/ids.json", "w", encoding="utf-8") as f:
    head = {"variant": variant, "tool": "llama-tokenize --ids (special: defaults; plain: --no-bos --no-parse-special)"}
    f.write(json.dumps(head, ensure_ascii=False)[:-1] + ', "cases": [\n')
    f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
    f.write("\n]}\n")
print(f"{len(cases)} texts written to {d}/ids.json")
PY
