package kernels

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"braid/internal/quant"
	"braid/internal/sharedtest"
)

// refIQDir holds llama.cpp's reference data for the low-bit formats; see its
// README.md.
const refIQDir = "../../../shared/testdata/quants-iq/"

// TestReferenceDotsLowBit checks the Q1_0 and Q2_0 dots against llama.cpp's
// vec_dot on the rows of quants-iq.gguf (all five, including the ternary row
// 4), with activations our own Q8_0 conversion produced, which must be
// llama.cpp's act_q8_0 bytes.
func TestReferenceDotsLowBit(t *testing.T) {
	gb, err := os.ReadFile(refIQDir + "quants-iq.gguf")
	if err != nil {
		sharedtest.Missing(t, "llama.cpp reference data not available (%v): it lives in the shared checkout next to the repository", err)
	}
	jb, err := os.ReadFile(refIQDir + "quants-iq-vec_dot.json")
	if err != nil {
		sharedtest.Missing(t, "llama.cpp reference data not available (%v)", err)
	}
	tensors, err := readGGUF(gb)
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Types map[string]struct {
			VecDotType string    `json:"vec_dot_type"`
			Dot        []float64 `json:"dot"`
		} `json:"types"`
	}
	if err := json.Unmarshal(jb, &ref); err != nil {
		t.Fatal(err)
	}
	const n = 512
	x := convAct(quant.Q8_0, bytesF32(tensors["act_source"].data))
	if string(x) != string(tensors["act_q8_0"].data) {
		t.Fatal("act_q8_0: activation conversion differs from llama.cpp's bytes")
	}
	for _, typ := range lowBitTypes {
		name := map[quant.Type]string{quant.Q1_0: "q1_0", quant.Q2_0: "q2_0"}[typ]
		r, ok := ref.Types[name]
		w, ok2 := tensors[name]
		if !ok || !ok2 {
			t.Errorf("%s: missing from the reference data", name)
			continue
		}
		if w.typ != typ {
			t.Errorf("%s: tensor type %s, want %s", name, w.typ, typ)
			continue
		}
		g := generic[typ]
		if r.VecDotType != "q8_0" || g.act != quant.Q8_0 {
			t.Errorf("%s: activation type %s, llama.cpp uses %s", name, g.act, r.VecDotType)
			continue
		}
		rb, _ := typ.RowBytes(n)
		if len(r.Dot) != 5 || len(w.data) != 5*int(rb) {
			t.Fatalf("%s: %d reference dots and %d bytes, want 5 rows of %d", name, len(r.Dot), len(w.data), rb)
		}
		for row := 0; row < 5; row++ {
			wr := w.data[row*int(rb) : (row+1)*int(rb)]
			got := float64(g.dot(n, wr, x))
			want := r.Dot[row]
			// Integer block sums are exact on both sides; only the float
			// combination of the block results differs (llama.cpp's SIMD
			// order), by a few ulps of the sum of |terms|.
			_, tol := refDot(t, typ, g.act, n, wr, x)
			if math.Abs(got-want) > tol {
				t.Errorf("%s row %d: generic dot %.9g, llama.cpp %.9g (tolerance %.3g)", name, row, got, want, tol)
			}
		}
	}
}

// TestLowBitSelected checks that the low-bit formats have a kernel, taking
// Q8_0 activations as llama.cpp's do.
func TestLowBitSelected(t *testing.T) {
	for _, typ := range lowBitTypes {
		d := implFor(typ)
		if d == nil {
			t.Errorf("%s: no kernel selected", typ)
			continue
		}
		if d.act != quant.Q8_0 {
			t.Errorf("%s: activations as %s, want Q8_0", typ, d.act)
		}
	}
}
