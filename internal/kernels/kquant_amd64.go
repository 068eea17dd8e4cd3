package kernels

import (
	"fmt"

	"golang.org/x/sys/cpu"

	"braid/internal/quant"
)

// Assembly kernels in kquant_amd64.s. Each takes nb >= 1 whole super-blocks
// of weights at w and Q8_K activations at x; the Go wrappers check lengths.

//go:noescape
func kqQ4KAVX512VNNI(w, x *byte, nb int) float32

//go:noescape
func kqQ4KAVX2(w, x *byte, nb int) float32

//go:noescape
func kqQ6KAVX512VNNI(w, x *byte, nb int) float32

//go:noescape
func kqQ4KRowsAVX512VNNI(w *byte, ldw int, x *byte, nb int, dst *float32, rows int)

//go:noescape
func kqQ6KRowsAVX512VNNI(w *byte, ldw int, x *byte, nb int, dst *float32, rows int)

// kqRowsWrap makes a dotImpl.rows of a rows kernel for blocks of wsize
// bytes, checking the operands so the assembly never reads past a slice.
func kqRowsWrap(k func(w *byte, ldw int, x *byte, nb int, dst *float32, rows int), wsize int) func(n int, w []byte, ldw int, x []byte, dst []float32) {
	return func(n int, w []byte, ldw int, x []byte, dst []float32) {
		nb := n / 256
		if len(dst) == 0 || nb == 0 {
			clear(dst)
			return
		}
		if n%256 != 0 || ldw < nb*wsize || len(w) < (len(dst)-1)*ldw+nb*wsize || len(x) < nb*kqQ8KSize {
			panic(fmt.Sprintf("kernels: K-quant rows: %d rows of %d values at stride %d: weights %d bytes, activations %d", len(dst), n, ldw, len(w), len(x)))
		}
		k(&w[0], ldw, &x[0], nb, &dst[0], len(dst))
	}
}

//go:noescape
func kqQ6KAVX2(w, x *byte, nb int) float32

//go:noescape
func kqQ2KAVX512VNNI(w, x *byte, nb int) float32

//go:noescape
func kqQ3KAVX512VNNI(w, x *byte, nb int) float32

//go:noescape
func kqQ2KAVX2(w, x *byte, nb int) float32

//go:noescape
func kqQ3KAVX2(w, x *byte, nb int) float32

//go:noescape
func kqIQ4XSAVX2(w, x *byte, nb int) float32

//go:noescape
func kqIQ4XSAVX512VNNI(w, x *byte, nb int) float32

//go:noescape
func kqQ5KAVX512VNNI(w, x *byte, nb int) float32

//go:noescape
func kqQ5KAVX2(w, x *byte, nb int) float32

//go:noescape
func cpuidVendor() (ebx, edx, ecx uint32)

// cpuVendor is the CPUID vendor string: "GenuineIntel", "AuthenticAMD", ...
func cpuVendor() string {
	b, d, c := cpuidVendor()
	var v [12]byte
	for i := 0; i < 4; i++ {
		v[i], v[4+i], v[8+i] = byte(b>>(8*i)), byte(d>>(8*i)), byte(c>>(8*i))
	}
	return string(v[:])
}

// kqPrefetchOn says whether the K-quant dot kernels prefetch weights ahead
// (KQ_PREFETCH3 in kquant_amd64.s): yes, as measured best on Sapphire
// Rapids, but not on AMD, where it made streaming slower (Zen 4: a third).
var kqPrefetchOn byte = 1

func init() {
	if v := cpuVendor(); v == "AuthenticAMD" || v == "HygonGenuine" {
		kqPrefetchOn = 0
	}
	// VPERMW and the byte/word ops need BW; VL for the 256-bit EVEX forms;
	// VNNI for VPDPWSSD. FMA and F16C come with every AVX-512 CPU.
	avx512 := cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
		cpu.X86.HasAVX512VNNI && cpu.X86.HasFMA && cpu.X86.HasF16C
	avx2 := cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

	registerFast(quant.Q2_K, avx512, &dotImpl{name: "avx512vnni", act: quant.Q8_K, dot: kqWrap(kqQ2KAVX512VNNI, kqQ2KSize)})
	registerFast(quant.Q2_K, avx2, &dotImpl{name: "avx2", act: quant.Q8_K, dot: kqWrap(kqQ2KAVX2, kqQ2KSize)})
	registerFast(quant.Q3_K, avx512, &dotImpl{name: "avx512vnni", act: quant.Q8_K, dot: kqWrap(kqQ3KAVX512VNNI, kqQ3KSize)})
	registerFast(quant.Q3_K, avx2, &dotImpl{name: "avx2", act: quant.Q8_K, dot: kqWrap(kqQ3KAVX2, kqQ3KSize)})
	registerFast(quant.Q4_K, avx512, &dotImpl{name: "avx512vnni", act: quant.Q8_K, dot: kqWrap(kqQ4KAVX512VNNI, kqQ4KSize),
		rows: kqRowsWrap(kqQ4KRowsAVX512VNNI, kqQ4KSize)})
	registerFast(quant.Q4_K, avx2, &dotImpl{name: "avx2", act: quant.Q8_K, dot: kqWrap(kqQ4KAVX2, kqQ4KSize)})
	registerFast(quant.Q5_K, avx512, &dotImpl{name: "avx512vnni", act: quant.Q8_K, dot: kqWrap(kqQ5KAVX512VNNI, kqQ5KSize)})
	registerFast(quant.Q5_K, avx2, &dotImpl{name: "avx2", act: quant.Q8_K, dot: kqWrap(kqQ5KAVX2, kqQ5KSize)})
	registerFast(quant.Q6_K, avx512, &dotImpl{name: "avx512vnni", act: quant.Q8_K, dot: kqWrap(kqQ6KAVX512VNNI, kqQ6KSize),
		rows: kqRowsWrap(kqQ6KRowsAVX512VNNI, kqQ6KSize)})
	registerFast(quant.Q6_K, avx2, &dotImpl{name: "avx2", act: quant.Q8_K, dot: kqWrap(kqQ6KAVX2, kqQ6KSize)})
	// IQ4_XS unpacks its scales with PDEP (BMI2, on every AVX-512 CPU).
	registerFast(quant.IQ4_XS, avx512 && cpu.X86.HasBMI2, &dotImpl{name: "avx512vnni", act: quant.Q8_K, dot: kqWrap(kqIQ4XSAVX512VNNI, kqIQ4XSSize)})
	registerFast(quant.IQ4_XS, avx2 && cpu.X86.HasBMI2, &dotImpl{name: "avx2", act: quant.Q8_K, dot: kqWrap(kqIQ4XSAVX2, kqIQ4XSSize)})
}
