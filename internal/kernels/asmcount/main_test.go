package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"braid/internal/quant"
)

// TestEveryKernelCounted runs the tool on the real sources: every kernel of
// the table must be found, its main loop identified and counted, and every
// count must be a whole number of blocks of its format.
func TestEveryKernelCounted(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, ".."); err != nil {
		t.Fatal(err)
	}
	src := &sources{dir: ".."}
	for _, r := range kernels {
		for _, k := range []kernel{r.avx512, r.avx2, r.neon} {
			if k.sym == "" {
				continue
			}
			c, err := measure(src, r.typ, k)
			if err != nil {
				t.Fatal(err)
			}
			if c.weights%r.typ.BlockSize() != 0 || c.insns <= 0 || c.vector > c.insns {
				t.Errorf("%s %s: %+v", r.typ, k.sym, c)
			}
		}
	}
	for _, f := range fallbacks {
		if _, err := measure(src, f.typ, f.k); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(out.String(), "| Q4_K |") {
		t.Errorf("no Q4_K row in\n%s", out.String())
	}
}

// TestTableMatchesSources: each symbol of the table is declared in a Go file
// of its architecture and registered there, so a renamed or new kernel
// cannot leave the table counting a stale one; and every dot kernel the
// package registers for a format of the table appears in it.
func TestTableMatchesSources(t *testing.T) {
	goSrc := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		files, err := filepath.Glob(filepath.Join("..", "*_"+arch+".go"))
		if err != nil {
			t.Fatal(err)
		}
		var all strings.Builder
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all.Write(b)
		}
		goSrc[arch] = all.String()
	}
	listed := map[string]bool{}
	for _, f := range fallbacks {
		listed[f.k.sym] = true
	}
	for _, r := range kernels {
		for arch, k := range map[string]kernel{"amd64": r.avx512, "amd64 ": r.avx2, "arm64": r.neon} {
			if k.sym == "" {
				continue
			}
			listed[k.sym] = true
			a := strings.TrimSpace(arch)
			if !strings.HasSuffix(k.file, "_"+a+".s") {
				t.Errorf("%s: file %s is not an %s file", k.sym, k.file, a)
			}
			if !strings.Contains(goSrc[a], "func "+k.sym+"(") {
				t.Errorf("%s: not declared in any *_%s.go file", k.sym, a)
			}
		}
	}
	// Dot kernels of the amd64 AVX-512/AVX2 and arm64 files: declarations
	// named like the table's (vd*, kq*, iq*) that take weights and
	// activations, minus tiles and helpers.
	decl := regexp.MustCompile(`func ((?:vd|kq|iq)\w+)\((?:n int, w, x \[\]byte|w, x \*byte, nb int)\) float32`)
	for arch, s := range goSrc {
		for _, m := range decl.FindAllStringSubmatch(s, -1) {
			if !listed[m[1]] {
				t.Errorf("%s: dot kernel %s is in neither the table nor the fallbacks", arch, m[1])
			}
		}
	}
}

// TestCountSynthetic checks the parsing and counting on a small source
// whose answer is known by hand: a function-like macro, a loop of two
// blocks per iteration of a 32-value format with a BYTE-encoded
// instruction, and a tail loop that the main one must win over.
func TestCountSynthetic(t *testing.T) {
	const src = `#include "textflag.h"
#define TWO(a, b) \
	VPADDD a, b, b /* one */ \
	VPXORD b, b, b

TEXT ·synth(SB), NOSPLIT, $0-60
	MOVQ w_base+8(FP), SI
	MOVQ n+0(FP), CX
loop:
	TWO(Z1, Z2)
	BYTE $0x62; BYTE $0xD2; BYTE $0x5E; BYTE $0x48; BYTE $0x52; BYTE $0xC0 // vdpbf16ps
	PREFETCHT0 512(SI)
	ADDQ $68, SI
	SUBQ $2, CX
	JNZ loop
tail:
	VPADDD Z1, Z2, Z3
	ADDQ $34, SI
	DECQ CX
	JNZ tail
	RET
`
	f, err := parseFile(src)
	if err != nil {
		t.Fatal(err)
	}
	ss := f["synth"]
	if ss == nil {
		t.Fatalf("no synth in %v", f)
	}
	src2 := &sources{files: map[string]map[string][]stmt{"x_amd64.s": f}}
	c, err := measure(src2, quant.Q8_0, kernel{"x_amd64.s", "synth"})
	if err != nil {
		t.Fatal(err)
	}
	// loop: VPADDD, VPXORD, BYTES, PREFETCHT0, ADDQ, SUBQ, JNZ
	want := count{loop: "loop", insns: 7, vector: 3, weights: 64, per256: 28, vector256: 12}
	if c != want {
		t.Errorf("got %+v, want %+v", c, want)
	}
}

// TestArm64Words: the arm64 generators encode instructions as WORDs with
// the instruction in a comment; advances of the weight register and SIMD
// operands are read from that comment.
func TestArm64Words(t *testing.T) {
	const src = `TEXT ·k(SB), NOSPLIT, $0-28
	MOVD w+0(FP), R0
l:
	WORD $0x4cdfa0d0 // ld1 {v16.16b, v17.16b}, [x0], #32
	WORD $0x4e909419 // sdot v25.4s, v0.16b, v16.16b
	WORD $0x91010800 // add x0, x0, #66
	WORD $0x91049021 // add x1, x1, #292
	WORD $0xf1000442 // subs x2, x2, #1
	BNE l
	RET
`
	f, err := parseFile(src)
	if err != nil {
		t.Fatal(err)
	}
	ss := f["k"]
	if got := advance(ss, "R0"); got != 98 {
		t.Errorf("advance of R0 = %d, want 32+66", got)
	}
	var vec int
	for _, s := range ss {
		if s.op != "" && isVector(s) {
			vec++
		}
	}
	if vec != 2 {
		t.Errorf("%d SIMD statements, want 2 (ld1 and sdot)", vec)
	}
}

// TestNestedLoopRefused: a loop inside the main loop has a dynamic count
// the static one does not give, so the tool must say so, not guess.
func TestNestedLoopRefused(t *testing.T) {
	const src = `TEXT ·k(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
outer:
	MOVQ $4, DX
inner:
	VPADDD Z1, Z2, Z2
	DECQ DX
	JNZ inner
	ADDQ $144, SI
	DECQ CX
	JNZ outer
	RET
`
	f, err := parseFile(src)
	if err != nil {
		t.Fatal(err)
	}
	_, err = measure(&sources{files: map[string]map[string][]stmt{"k_amd64.s": f}}, quant.Q4_K, kernel{"k_amd64.s", "k"})
	if err == nil || !strings.Contains(err.Error(), "holds loop inner") {
		t.Errorf("got %v, want a nested-loop error", err)
	}
}
