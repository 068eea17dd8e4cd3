//go:build amd64

package kernels

import (
	"math"

	"golang.org/x/sys/cpu"
)

var opsLevel = opsBest(opsLevels())

// opsLevels lists the assembly levels this CPU runs, widest first. Both need
// FMA and F16C besides the vector width; x/sys/cpu already folds in whether
// the OS saves the wide registers.
func opsLevels() []int {
	x := &cpu.X86
	var l []int
	base := x.HasAVX2 && x.HasFMA && x.HasF16C
	if base && x.HasAVX512F {
		l = append(l, opsAVX512)
	}
	if base {
		l = append(l, opsAVX2)
	}
	return l
}

// The assembly handles n rounded down to a multiple of 8 (both widths finish
// with a 256-bit step); the Go side does the last n%8 with the references.

//go:noescape
func sumSquaresAVX2(x *float32, n int) float64

//go:noescape
func sumSquaresAVX512(x *float32, n int) float64

//go:noescape
func dotF32AVX2(a, b *float32, n int) float32

//go:noescape
func dotF32AVX512(a, b *float32, n int) float32

//go:noescape
func dotF16AVX2(a *uint16, b *float32, n int) float32

//go:noescape
func dotF16AVX512(a *uint16, b *float32, n int) float32

//go:noescape
func axpyF32AVX2(dst *float32, a float32, x *float32, n int)

//go:noescape
func axpyF32AVX512(dst *float32, a float32, x *float32, n int)

//go:noescape
func axpyF16AVX2(dst *float32, a float32, x *uint16, n int)

//go:noescape
func axpyF16AVX512(dst *float32, a float32, x *uint16, n int)

//go:noescape
func f32ToF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func f32ToF16AVX512(dst *uint16, src *float32, n int)

//go:noescape
func f16ToF32AVX2(dst *float32, src *uint16, n int)

//go:noescape
func f16ToF32AVX512(dst *float32, src *uint16, n int)

func sumSquaresArch(x []float32) float64 {
	n := len(x) &^ 7
	var s float64
	if n > 0 {
		if opsLevel == opsAVX512 {
			s = sumSquaresAVX512(&x[0], n)
		} else {
			s = sumSquaresAVX2(&x[0], n)
		}
	}
	if n < len(x) {
		s += sumSquaresGeneric(x[n:])
	}
	return s
}

func dotF32Arch(a, b []float32) float32 {
	n := len(a) &^ 7
	var s float32
	if n > 0 {
		if opsLevel == opsAVX512 {
			s = dotF32AVX512(&a[0], &b[0], n)
		} else {
			s = dotF32AVX2(&a[0], &b[0], n)
		}
	}
	if n < len(a) {
		s += dotF32Generic(a[n:], b[n:])
	}
	return s
}

func dotF16Arch(a []uint16, b []float32) float32 {
	n := len(a) &^ 7
	var s float32
	if n > 0 {
		if opsLevel == opsAVX512 {
			s = dotF16AVX512(&a[0], &b[0], n)
		} else {
			s = dotF16AVX2(&a[0], &b[0], n)
		}
	}
	if n < len(a) {
		s += dotF16Generic(a[n:], b[n:])
	}
	return s
}

func axpyF32Arch(dst []float32, a float32, x []float32) {
	n := len(dst) &^ 7
	if n > 0 {
		if opsLevel == opsAVX512 {
			axpyF32AVX512(&dst[0], a, &x[0], n)
		} else {
			axpyF32AVX2(&dst[0], a, &x[0], n)
		}
	}
	if n < len(dst) {
		axpyF32Generic(dst[n:], a, x[n:])
	}
}

func axpyF16Arch(dst []float32, a float32, x []uint16) {
	n := len(dst) &^ 7
	if n > 0 {
		if opsLevel == opsAVX512 {
			axpyF16AVX512(&dst[0], a, &x[0], n)
		} else {
			axpyF16AVX2(&dst[0], a, &x[0], n)
		}
	}
	if n < len(dst) {
		axpyF16Generic(dst[n:], a, x[n:])
	}
}

func f32ToF16Arch(dst []uint16, src []float32) {
	n := len(dst) &^ 7
	if n > 0 {
		if opsLevel == opsAVX512 {
			f32ToF16AVX512(&dst[0], &src[0], n)
		} else {
			f32ToF16AVX2(&dst[0], &src[0], n)
		}
	}
	if n < len(dst) {
		f32ToF16Generic(dst[n:], src[n:])
	}
}

func f16ToF32Arch(dst []float32, src []uint16) {
	n := len(dst) &^ 7
	if n > 0 {
		if opsLevel == opsAVX512 {
			f16ToF32AVX512(&dst[0], &src[0], n)
		} else {
			f16ToF32AVX2(&dst[0], &src[0], n)
		}
	}
	if n < len(dst) {
		f16ToF32Generic(dst[n:], src[n:])
	}
}

// swiGLUAVX512 handles n, a multiple of 16, swiGLUAVX2 a multiple of 8.
//
//go:noescape
func swiGLUAVX512(dst, gate, up *float32, n int)

//go:noescape
func swiGLUAVX2(dst, gate, up *float32, n int)

func swiGLUArch(dst, gate, up []float32) {
	n := 0
	switch opsLevel {
	case opsAVX512:
		if n = len(dst) &^ 15; n > 0 {
			swiGLUAVX512(&dst[0], &gate[0], &up[0], n)
		}
	case opsAVX2:
		if n = len(dst) &^ 7; n > 0 {
			swiGLUAVX2(&dst[0], &gate[0], &up[0], n)
		}
	}
	if n < len(dst) {
		swiGLUGeneric(dst[n:], gate[n:], up[n:])
	}
}

// The attention row loops: one call for all the rows with AVX-512 for
// heads of 64 and 128 values and with AVX2 for any multiple of 8 (each
// level's own row arithmetic, so the bits match DotF16/AxpyF16 at that
// level), otherwise the row kernels one row at a time.

//go:noescape
func dotF16Rows64AVX512(dst *float32, k *uint16, stride int, q *float32, scale float32, n int)

//go:noescape
func dotF16Rows128AVX512(dst *float32, k *uint16, stride int, q *float32, scale float32, n int)

//go:noescape
func axpyF16Rows64AVX512(out *float32, p *float32, v *uint16, stride int, n int)

//go:noescape
func axpyF16Rows128AVX512(out *float32, p *float32, v *uint16, stride int, n int)

//go:noescape
func dotF16RowsAVX2(dst *float32, k *uint16, stride int, q *float32, scale float32, hd int, n int)

//go:noescape
func axpyF16RowsAVX2(out *float32, p *float32, v *uint16, stride int, hd int, n int)

func dotF16RowsArch(dst []float32, k []uint16, stride int, q []float32, scale float32) {
	switch {
	case opsLevel == opsAVX512 && len(q) == 64:
		dotF16Rows64AVX512(&dst[0], &k[0], 2*stride, &q[0], scale, len(dst))
		return
	case opsLevel == opsAVX512 && len(q) == 128:
		dotF16Rows128AVX512(&dst[0], &k[0], 2*stride, &q[0], scale, len(dst))
		return
	case opsLevel == opsAVX2 && len(q)%8 == 0:
		dotF16RowsAVX2(&dst[0], &k[0], 2*stride, &q[0], scale, len(q), len(dst))
		return
	}
	for i := range dst {
		dst[i] = dotF16Arch(k[i*stride:i*stride+len(q)], q) * scale
	}
}

//go:noescape
func dotF16Rows2AVX2(dst0, dst1 *float32, k *uint16, stride int, q0, q1 *float32, scale float32, hd int, n int)

// dotF16Rows2Arch is DotF16Rows for two vectors, with the AVX2 pair kernel
// where DotF16Rows would take the AVX2 row kernel (the same bits), else
// two DotF16Rows.
func dotF16Rows2Arch(dst0, dst1 []float32, k []uint16, stride int, q0, q1 []float32, scale float32) {
	if opsLevel == opsAVX2 && len(q0)%8 == 0 {
		dotF16Rows2AVX2(&dst0[0], &dst1[0], &k[0], 2*stride, &q0[0], &q1[0], scale, len(q0), len(dst0))
		return
	}
	dotF16RowsArch(dst0, k, stride, q0, scale)
	dotF16RowsArch(dst1, k, stride, q1, scale)
}

func axpyF16RowsArch(out []float32, p []float32, v []uint16, stride int) {
	switch {
	case opsLevel == opsAVX512 && len(out) == 64:
		axpyF16Rows64AVX512(&out[0], &p[0], &v[0], 2*stride, len(p))
		return
	case opsLevel == opsAVX512 && len(out) == 128:
		axpyF16Rows128AVX512(&out[0], &p[0], &v[0], 2*stride, len(p))
		return
	case opsLevel == opsAVX2 && len(out)%8 == 0:
		axpyF16RowsAVX2(&out[0], &p[0], &v[0], 2*stride, len(out), len(p))
		return
	}
	for i, a := range p {
		axpyF16Arch(out, a, v[i*stride:i*stride+len(out)])
	}
}

// softmaxPad fills the lanes past a row's end: e^(-Inf - m) is 0.
var softmaxPad = func() (p [8]float32) {
	for i := range p {
		p[i] = float32(math.Inf(-1))
	}
	return p
}()

//go:noescape
func softmaxExpAVX2(x *float32, n int, m float32, acc *[8]float64)

// softmaxExpArch is softmaxExpGeneric with the eight-lane kernel (AVX2,
// which every AVX-512 CPU here has too); the last n%8 values run through
// it padded with values whose exponential is 0, so that every value's
// bits are the kernel's and lane i%8 takes value i.
func softmaxExpArch(x []float32, m float32, acc *[8]float64) {
	n := len(x) &^ 7
	if n > 0 {
		softmaxExpAVX2(&x[0], n, m, acc)
	}
	if n < len(x) {
		pad := softmaxPad
		copy(pad[:], x[n:])
		softmaxExpAVX2(&pad[0], 8, m, acc)
		copy(x[n:], pad[:])
	}
}
