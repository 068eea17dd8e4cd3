// Command asmcount counts, statically, the instructions each weight
// format's dot-product kernel executes per 256 weights, from the assembly
// sources of internal/kernels: the amd64 AVX-512 and AVX2 kernels beside the
// arm64 NEON ones. The arm64 kernels are tested under qemu but have never
// been timed on arm64 hardware; this is what can be said about their cost
// without it.
//
// For each kernel it expands the file's macros, finds its main loop (the
// backward branch whose iteration advances the weight pointer furthest),
// and divides the loop's instruction count by the weights one iteration
// consumes (the pointer's advance in bytes, over the format's block bytes,
// times its block size). A loop that contains another loop cannot be
// counted this way and is reported as an error, as is a kernel whose loop
// does not advance the weight pointer.
//
//	go run ./internal/kernels/asmcount [-dir internal/kernels] [-md]
//
// Instruction counts are not cycles: a 512-bit AVX-512 instruction does
// four times the work of a 128-bit NEON one, and cores differ in how many
// they retire per cycle. The table says how much work per weight each
// kernel asks of its core's vector units, which bounds the speed a core
// of known issue width can reach.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"braid/internal/quant"
)

// kernel names one assembly dot product: the file and TEXT symbol.
type kernel struct {
	file, sym string
}

// row is one weight format's kernels, "" where the architecture has none.
type row struct {
	typ                quant.Type
	avx512, avx2, neon kernel
}

// kernels lists every format with an assembly dot product, in the order of
// the table. The symbols are the ones registered in the *_amd64.go and
// *_arm64.go files (TestTableMatchesSources checks they exist).
var kernels = []row{
	{quant.F32, kernel{"dot_amd64.s", "vdF32AVX512"}, kernel{"dot_amd64.s", "vdF32AVX2"}, kernel{"dot_arm64.s", "vdF32NEON"}},
	{quant.F16, kernel{"dot_amd64.s", "vdF16AVX512"}, kernel{"dot_amd64.s", "vdF16AVX2"}, kernel{"dot_arm64.s", "vdF16NEON"}},
	{quant.BF16, kernel{"dot2_amd64.s", "vdBF16AVX512BF16"}, kernel{"dot2_amd64.s", "vdBF16AVX2"}, kernel{"dot2_arm64.s", "vdBF16NEON"}},
	{quant.Q8_0, kernel{"dot_amd64.s", "vdQ8_0VNNI"}, kernel{"dot_amd64.s", "vdQ8_0AVX2"}, kernel{"dot_arm64.s", "vdQ8_0DOT"}},
	{quant.Q4_0, kernel{"dot_amd64.s", "vdQ4_0VNNI"}, kernel{"dot_amd64.s", "vdQ4_0AVX2"}, kernel{"dot_arm64.s", "vdQ4_0DOT"}},
	{quant.Q4_1, kernel{"dot2_amd64.s", "vdQ4_1VNNI"}, kernel{"dot2_amd64.s", "vdQ4_1AVX2"}, kernel{"dot2_arm64.s", "vdQ4_1DOT"}},
	{quant.Q5_0, kernel{"dot2_amd64.s", "vdQ5_0VNNI"}, kernel{"dot2_amd64.s", "vdQ5_0AVX2"}, kernel{"dot2_arm64.s", "vdQ5_0DOT"}},
	{quant.Q5_1, kernel{"dot2_amd64.s", "vdQ5_1VNNI"}, kernel{"dot2_amd64.s", "vdQ5_1AVX2"}, kernel{"dot2_arm64.s", "vdQ5_1DOT"}},
	{quant.IQ4_NL, kernel{"dot2_amd64.s", "vdIQ4NLVNNI"}, kernel{"dot2_amd64.s", "vdIQ4NLAVX2"}, kernel{"dot2_arm64.s", "vdIQ4NLDOT"}},
	{quant.MXFP4, kernel{"dot2_amd64.s", "vdMXFP4VBMI"}, kernel{"dot2_amd64.s", "vdMXFP4AVX2"}, kernel{"dot2_arm64.s", "vdMXFP4DOT"}},
	{quant.Q2_K, kernel{"kquant_amd64.s", "kqQ2KAVX512VNNI"}, kernel{"kquant_amd64.s", "kqQ2KAVX2"}, kernel{"kquant_arm64.s", "kqQ2KNEONDot"}},
	{quant.Q3_K, kernel{"kquant_amd64.s", "kqQ3KAVX512VNNI"}, kernel{"kquant_amd64.s", "kqQ3KAVX2"}, kernel{"kquant_arm64.s", "kqQ3KNEONDot"}},
	{quant.Q4_K, kernel{"kquant_amd64.s", "kqQ4KAVX512VNNI"}, kernel{"kquant_amd64.s", "kqQ4KAVX2"}, kernel{"kquant_arm64.s", "kqQ4KNEONDot"}},
	{quant.Q5_K, kernel{"kquant_amd64.s", "kqQ5KAVX512VNNI"}, kernel{"kquant_amd64.s", "kqQ5KAVX2"}, kernel{"kquant_arm64.s", "kqQ5KNEONDot"}},
	{quant.Q6_K, kernel{"kquant_amd64.s", "kqQ6KAVX512VNNI"}, kernel{"kquant_amd64.s", "kqQ6KAVX2"}, kernel{"kquant_arm64.s", "kqQ6KNEONDot"}},
	{quant.IQ4_XS, kernel{"kquant_amd64.s", "kqIQ4XSAVX512VNNI"}, kernel{"kquant_amd64.s", "kqIQ4XSAVX2"}, kernel{"kquant_arm64.s", "kqIQ4XSNEONDot"}},
	{quant.IQ2_XXS, kernel{"iq_amd64.s", "iqIQ2XXSAVX512"}, kernel{"iq_amd64.s", "iqIQ2XXSAVX2"}, kernel{"iq_arm64.s", "iqIQ2XXSNEON"}},
	{quant.IQ2_XS, kernel{"iq_amd64.s", "iqIQ2XSAVX512"}, kernel{"iq_amd64.s", "iqIQ2XSAVX2"}, kernel{"iq_arm64.s", "iqIQ2XSNEON"}},
	{quant.IQ2_S, kernel{}, kernel{"iq_amd64.s", "iqIQ2SAVX2"}, kernel{"iq_arm64.s", "iqIQ2SNEON"}},
	{quant.IQ3_XXS, kernel{"iq_amd64.s", "iqIQ3XXSAVX512"}, kernel{"iq_amd64.s", "iqIQ3XXSAVX2"}, kernel{"iq_arm64.s", "iqIQ3XXSNEON"}},
	{quant.IQ3_S, kernel{"iq_amd64.s", "iqIQ3SAVX512"}, kernel{"iq_amd64.s", "iqIQ3SAVX2"}, kernel{"iq_arm64.s", "iqIQ3SNEON"}},
	{quant.IQ1_S, kernel{"iq_amd64.s", "iqIQ1SAVX512"}, kernel{"iq_amd64.s", "iqIQ1SAVX2"}, kernel{"iq_arm64.s", "iqIQ1SNEON"}},
	{quant.IQ1_M, kernel{"iq_amd64.s", "iqIQ1MAVX512"}, kernel{"iq_amd64.s", "iqIQ1MAVX2"}, kernel{"iq_arm64.s", "iqIQ1MNEON"}},
	{quant.TQ1_0, kernel{}, kernel{"iq_amd64.s", "iqTQ1AVX2"}, kernel{"iq_arm64.s", "iqTQ1NEON"}},
	{quant.TQ2_0, kernel{}, kernel{"iq_amd64.s", "iqTQ2AVX2"}, kernel{"iq_arm64.s", "iqTQ2NEON"}},
}

// fallbacks are AVX-512 kernels that run where the table's first choice
// cannot: MXFP4 without VBMI (Cascade Lake), BF16 without AVX512_BF16.
var fallbacks = []struct {
	typ  quant.Type
	k    kernel
	when string
}{
	{quant.MXFP4, kernel{"dot2_amd64.s", "vdMXFP4VNNI"}, "AVX-512 VNNI without VBMI"},
	{quant.BF16, kernel{"dot2_amd64.s", "vdBF16AVX512"}, "AVX-512 without BF16"},
}

// count is what one kernel's main loop costs.
type count struct {
	loop          string  // its label
	insns, vector int     // instructions per iteration, and how many are SIMD/FP
	weights       int     // weights consumed per iteration
	per256        float64 // instructions per 256 weights
	vector256     float64 // SIMD/FP instructions per 256 weights
}

// sources caches parsed files by name.
type sources struct {
	dir   string
	files map[string]map[string][]stmt
}

func (s *sources) kernel(k kernel) ([]stmt, error) {
	if s.files == nil {
		s.files = map[string]map[string][]stmt{}
	}
	f, ok := s.files[k.file]
	if !ok {
		b, err := os.ReadFile(filepath.Join(s.dir, k.file))
		if err != nil {
			return nil, err
		}
		if f, err = parseFile(string(b)); err != nil {
			return nil, fmt.Errorf("%s: %v", k.file, err)
		}
		s.files[k.file] = f
	}
	ss, ok := f[k.sym]
	if !ok {
		return nil, fmt.Errorf("%s: no TEXT symbol %s", k.file, k.sym)
	}
	return ss, nil
}

// measure counts k's main loop for weight format t.
func measure(src *sources, t quant.Type, k kernel) (count, error) {
	ss, err := src.kernel(k)
	if err != nil {
		return count{}, err
	}
	wr, err := weightReg(ss)
	if err != nil {
		return count{}, fmt.Errorf("%s: %v", k.sym, err)
	}
	var best loop
	bestAdv := 0
	for _, l := range loops(ss) {
		if a := advance(ss[l.start:l.end+1], wr); a > bestAdv {
			best, bestAdv = l, a
		}
	}
	if bestAdv == 0 {
		return count{}, fmt.Errorf("%s: no loop advances the weight pointer %s", k.sym, wr)
	}
	for _, l := range loops(ss) {
		if l != best && l.start >= best.start && l.end <= best.end {
			return count{}, fmt.Errorf("%s: loop %s holds loop %s: its dynamic count needs the inner trip count", k.sym, best.label, l.label)
		}
	}
	c := count{loop: best.label}
	for _, s := range ss[best.start : best.end+1] {
		if s.op == "" {
			continue // a label
		}
		c.insns++
		if isVector(s) {
			c.vector++
		}
	}
	ts, bs := t.TypeSize(), t.BlockSize()
	if bestAdv%ts != 0 {
		return count{}, fmt.Errorf("%s: loop %s advances %d bytes, not whole %s blocks of %d", k.sym, best.label, bestAdv, t, ts)
	}
	c.weights = bestAdv / ts * bs
	c.per256 = float64(c.insns) * 256 / float64(c.weights)
	c.vector256 = float64(c.vector) * 256 / float64(c.weights)
	return c, nil
}

func main() {
	dir := flag.String("dir", "internal/kernels", "directory holding the kernels' .s files")
	flag.Parse()
	if err := run(os.Stdout, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "asmcount:", err)
		os.Exit(1)
	}
}

// run writes the table for the sources in dir.
func run(w io.Writer, dir string) error {
	src := &sources{dir: dir}
	fmt.Fprintln(w, "Instructions per 256 weights in each dot kernel's main loop (all / SIMD+FP), counted from the assembly.")
	fmt.Fprintln(w, "Widths: AVX-512 512-bit, AVX2 256-bit, NEON 128-bit.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| format | AVX-512 | AVX2 | NEON (SDOT) | NEON / AVX-512 | NEON / AVX2 | NEON loop: weights per iteration |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	rows := append([]row(nil), kernels...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].typ < rows[j].typ })
	var errs []string
	for _, r := range rows {
		cells := make([]string, 3)
		var cs [3]count
		for i, k := range []kernel{r.avx512, r.avx2, r.neon} {
			if k.sym == "" {
				cells[i] = "-"
				continue
			}
			c, err := measure(src, r.typ, k)
			if err != nil {
				errs = append(errs, err.Error())
				cells[i] = "?"
				continue
			}
			cs[i] = c
			cells[i] = fmt.Sprintf("%.0f / %.0f", c.per256, c.vector256)
		}
		ratio := func(a, b count) string {
			if a.per256 == 0 || b.per256 == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1fx", a.per256/b.per256)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %d |\n", r.typ, cells[0], cells[1], cells[2],
			ratio(cs[2], cs[0]), ratio(cs[2], cs[1]), cs[2].weights)
	}
	fmt.Fprintln(w)
	for _, f := range fallbacks {
		c, err := measure(src, f.typ, f.k)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		fmt.Fprintf(w, "%s on %s (%s): %.0f / %.0f\n", f.typ, f.when, f.k.sym, c.per256, c.vector256)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d kernels not counted:\n  %s", len(errs), strings.Join(errs, "\n  "))
	}
	return nil
}
