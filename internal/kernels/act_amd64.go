//go:build amd64

package kernels

import (
	"fmt"

	"braid/internal/quant"

	"golang.org/x/sys/cpu"
)

// Assembly activation conversions (act_amd64.s), byte-identical to the Go
// ones of act.go for every input (TestActConvExact, FuzzActConv); they take
// whole blocks, the wrappers below check the lengths. act.go's init runs
// first (files initialize in name order), so these replace the Go ones.

//go:noescape
func actQ8_0AVX2(dst []byte, src []float32)

//go:noescape
func actQ8_1AVX2(dst []byte, src []float32)

//go:noescape
func actQ8_KAVX2(dst []byte, src []float32)

//go:noescape
func actF16AVX2(dst []byte, src []float32)

//go:noescape
func actBF16AVX2(dst []byte, src []float32)

func init() {
	// The conversions give the Go code's bytes, so they change no result;
	// BRAID_KERNELS=generic still runs only Go code, as it promises.
	x := &cpu.X86
	if forcedGeneric || !x.HasAVX2 {
		return
	}
	if x.HasF16C {
		registerAct(quant.Q8_0, "avx2", blockAct(quant.Q8_0, actQ8_0AVX2))
		registerAct(quant.Q8_1, "avx2", blockAct(quant.Q8_1, actQ8_1AVX2))
		registerAct(quant.F16, "avx2", elemAct(quant.F16, actF16AVX2, toF16))
	}
	registerAct(quant.Q8_K, "avx2", blockAct(quant.Q8_K, actQ8_KAVX2))
	registerAct(quant.BF16, "avx2", elemAct(quant.BF16, actBF16AVX2, toBF16))
}

// blockAct wraps an assembly quantizer of whole blocks of t; a src that is
// not whole blocks, or a dst of another size, goes to quant.Quantize,
// whose error names the lengths.
func blockAct(t quant.Type, fn func(dst []byte, src []float32)) func(dst []byte, src []float32) {
	bs, ts := t.BlockSize(), t.TypeSize()
	return func(dst []byte, src []float32) {
		if len(src)%bs != 0 || len(dst) != len(src)/bs*ts {
			if err := quant.Quantize(t, src, dst); err != nil {
				panic("kernels: " + err.Error())
			}
			return
		}
		fn(dst, src)
	}
}

// elemAct wraps an assembly converter of 16 values at a time to a 2-byte
// float format; tail converts what is left.
func elemAct(t quant.Type, fn, tail func(dst []byte, src []float32)) func(dst []byte, src []float32) {
	return func(dst []byte, src []float32) {
		if len(dst) < 2*len(src) {
			panic(fmt.Sprintf("kernels: %s activations: %d values into %d bytes, want %d", t, len(src), len(dst), 2*len(src)))
		}
		m := len(src) &^ 15
		if m > 0 {
			fn(dst[:2*m], src[:m])
		}
		tail(dst[2*m:], src[m:])
	}
}
