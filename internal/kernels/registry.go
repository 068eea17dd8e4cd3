// Package kernels holds the hot loops of inference: dot products and matrix
// products of every weight format against float32 activations, norms, RoPE,
// softmax, activations and the attention inner loops.
//
// Every kernel has a pure-Go reference implementation, which is the test
// oracle; assembly versions (amd64 AVX2 / AVX-512, arm64 NEON) are chosen once
// at start-up from the CPU's features, and BRAID_KERNELS=generic forces the
// references. The choice is visible through Selected.
package kernels

import (
	"fmt"
	"os"
	"sort"
	"sync"

	"braid/internal/quant"
)

// dotImpl is one implementation of the row dot product for one weight type.
// Activations are first converted to act (F32, F16, BF16, Q8_0, Q8_1 or Q8_K,
// as llama.cpp does); dot then multiplies n values of one weight row w (in the
// weight type's block format) with n activations x (in act's format).
//
// mm, when set, is a register-blocked tile kernel for prefill: it computes
// dst[c*ldd+r] = dot(w[r*ldw:], x[c*ldx:]) for r < rows and c < cols, where
// rows <= mmRows and cols <= mmCols. Reusing each loaded weight block for
// several activation columns is what makes matrix-matrix products faster
// than repeated matrix-vector ones.
type dotImpl struct {
	name string // "generic", "avx2", "avx512", "avx512vnni", "neon", "neon-dotprod"
	act  quant.Type
	dot  func(n int, w, x []byte) float32

	mm             func(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int)
	mmRows, mmCols int

	// mmWide, when set, is the prefill tile instead of mm: it takes the
	// activations as float32 (4 bytes per value) converted by wideAct, which
	// rounds them to act's values, so results match dot's. Float weights
	// use it: widening every activation once per call, not once per tile
	// row, leaves their tiles bound by multiply-adds, not conversions. The
	// K-quant tiles use it too, with wideAct writing their own Q8_K layout
	// into those 4 bytes per value (see kquant_mm.go).
	mmWide  func(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int)
	wideAct func(dst []byte, src []float32)
	// wideKind names wideAct's output format ("f16", "bf16", "kq-tile"):
	// impls with the same wideKind can share converted
	// activations (see MatMulShared).
	wideKind string

	// mmDot, when set, is a tile of at most mmDotCols columns (any rows)
	// on act's activations that computes every column with the row dot's
	// operations in the row dot's order: MatMul takes it for the products
	// of few vectors that must be exact (SetExactColumns) where the fast
	// tiles round differently, instead of the row dot once per vector.
	mmDot     func(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int)
	mmDotCols int

	// exactTiles says the tile (mm or mmWide) computes every column with
	// the row dot's float operations in its order, so a column's result
	// is the same bits whatever the number of vectors: products of few
	// vectors keep the tiles under SetExactColumns.
	exactTiles bool

	// rows, when set, is dot over consecutive rows in one call: dst[i] =
	// dot(n, w[i*ldw:], x) for i < len(dst), with dot's bits. A
	// one-vector product of short rows otherwise pays a call, the
	// kernel's constants and its register cleanup per row.
	rows func(n int, w []byte, ldw int, x []byte, dst []float32)
}

// generic holds the pure-Go reference implementation for each weight type;
// fast holds the assembly candidates this CPU can run. Both are filled by init
// functions, the references in *_generic.go files and the assembly in
// per-architecture files, which register with registerGeneric and
// registerFast. The choice between them is made once, lazily (init order
// across files is by file name, so it cannot be made in an init function).
var (
	generic = map[quant.Type]*dotImpl{}
	fast    = map[quant.Type][]*dotImpl{} // candidates in order of preference
)

func registerGeneric(t quant.Type, d *dotImpl) { generic[t] = d }

// registerFast adds an assembly candidate for t; ok says whether this CPU can
// run it. Candidates registered earlier win, so register the widest first.
func registerFast(t quant.Type, ok bool, d *dotImpl) {
	if ok {
		fast[t] = append(fast[t], d)
	}
}

// actQuantizers converts float32 activations to an activation format. Types
// missing here fall back to quant.Quantize.
var actQuantizers = map[quant.Type]func(dst []byte, src []float32){}

// actNames names the converter installed for each activation type
// ("generic", "avx2"), so tests can see which one runs.
var actNames = map[quant.Type]string{}

// registerAct installs the activation converter for act type t; the last
// registration wins, so an assembly file may replace the Go one from its init.
func registerAct(t quant.Type, name string, fn func(dst []byte, src []float32)) {
	actQuantizers[t], actNames[t] = fn, name
}

// forcedGeneric is read once: switching kernels under a running model would
// make results depend on timing.
var forcedGeneric = os.Getenv("BRAID_KERNELS") == "generic"

// ForcedGeneric reports whether BRAID_KERNELS=generic was set at start-up,
// which makes every weight type use its pure-Go reference kernel.
func ForcedGeneric() bool { return forcedGeneric }

var (
	selectOnce sync.Once
	chosen     map[quant.Type]*dotImpl
)

// pick chooses the implementation for each weight type: the first fast
// candidate whose activation format matches the reference's (so results do
// not silently change format), else the reference.
func pick(gen map[quant.Type]*dotImpl, cand map[quant.Type][]*dotImpl, forceGeneric bool) map[quant.Type]*dotImpl {
	out := make(map[quant.Type]*dotImpl, len(gen))
	for t, g := range gen {
		out[t] = g
		if forceGeneric {
			continue
		}
		for _, c := range cand[t] {
			if c.act == g.act {
				out[t] = c
				break
			}
		}
	}
	return out
}

func impls() map[quant.Type]*dotImpl {
	selectOnce.Do(func() { chosen = pick(generic, fast, forcedGeneric) })
	return chosen
}

// implFor returns the chosen kernel for weight type t, or nil.
func implFor(t quant.Type) *dotImpl { return impls()[t] }

// Choice is the kernel chosen for one weight type.
type Choice struct {
	Type quant.Type // weight type
	Impl string     // "generic", "avx2", "avx512vnni", "neon-dotprod", ...
	Act  quant.Type // format the activations are converted to
	// Prompt says how a product of many vectors (a prompt's chunk) runs
	// for this type: tiles, the repacked layout's kernel four vectors a
	// pass, or the row dot once per vector (the slow case shows here).
	Prompt string
}

// Selected returns the implementation chosen for every supported weight type,
// ordered by type id, so that `braid doctor` and start-up logs can show which
// kernels run (a silent fallback to generic code is a slow, invisible bug).
func Selected() []Choice {
	m := impls()
	out := make([]Choice, 0, len(m))
	for t, d := range m {
		out = append(out, Choice{Type: t, Impl: d.name, Act: d.act, Prompt: promptPath(t, d)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// promptPath is Choice.Prompt: the path matMulWith takes for many vectors
// (more than an exact-verification bound).
func promptPath(t quant.Type, d *dotImpl) string {
	tiles := ""
	if d.mm != nil || d.mmWide != nil {
		tiles = fmt.Sprintf("tiles of %dx%d", d.mmRows, d.mmCols)
		if d.mmCols >= 1024 {
			tiles = fmt.Sprintf("tiles of %d rows", d.mmRows)
		}
		if d.exactTiles {
			tiles += ", each vector the one-vector bits"
		}
	}
	if LayoutFor(t) == X8 {
		f := x8For(t, d.name == "generic")
		x8 := "x8, one vector a pass"
		if f != nil && (f.dot8x4 != nil || f.dot8x4a != nil) {
			x8 = "x8, four vectors a pass"
		}
		if tiles == "" || f == nil || f.noTiles {
			return x8
		}
		return "x8 rows unpacked for " + tiles
	}
	switch {
	case tiles != "":
		return tiles
	case d.mmDot != nil:
		return fmt.Sprintf("the row dot once per vector (in tiles of %d vectors under exact verification)", d.mmDotCols)
	}
	return "the row dot once per vector"
}
