//go:build arm64

package kernels

var opsLevel = opsBest(opsLevels())

// opsLevels: Advanced SIMD, FCVTL and FCVTN are part of every ARMv8-A core,
// so NEON needs no detection.
func opsLevels() []int { return []int{opsNEON} }

// The assembly handles n rounded down to a multiple of 4; the Go side does
// the last n%4 with the references.

//go:noescape
func sumSquaresNEON(x *float32, n int) float64

//go:noescape
func dotF32NEON(a, b *float32, n int) float32

//go:noescape
func dotF16NEON(a *uint16, b *float32, n int) float32

//go:noescape
func axpyF32NEON(dst *float32, a float32, x *float32, n int)

//go:noescape
func axpyF16NEON(dst *float32, a float32, x *uint16, n int)

//go:noescape
func f32ToF16NEON(dst *uint16, src *float32, n int)

//go:noescape
func f16ToF32NEON(dst *float32, src *uint16, n int)

func sumSquaresArch(x []float32) float64 {
	n := len(x) &^ 3
	var s float64
	if n > 0 {
		s = sumSquaresNEON(&x[0], n)
	}
	if n < len(x) {
		s += sumSquaresGeneric(x[n:])
	}
	return s
}

func dotF32Arch(a, b []float32) float32 {
	n := len(a) &^ 3
	var s float32
	if n > 0 {
		s = dotF32NEON(&a[0], &b[0], n)
	}
	if n < len(a) {
		s += dotF32Generic(a[n:], b[n:])
	}
	return s
}

func dotF16Arch(a []uint16, b []float32) float32 {
	n := len(a) &^ 3
	var s float32
	if n > 0 {
		s = dotF16NEON(&a[0], &b[0], n)
	}
	if n < len(a) {
		s += dotF16Generic(a[n:], b[n:])
	}
	return s
}

func axpyF32Arch(dst []float32, a float32, x []float32) {
	n := len(dst) &^ 3
	if n > 0 {
		axpyF32NEON(&dst[0], a, &x[0], n)
	}
	if n < len(dst) {
		axpyF32Generic(dst[n:], a, x[n:])
	}
}

func axpyF16Arch(dst []float32, a float32, x []uint16) {
	n := len(dst) &^ 3
	if n > 0 {
		axpyF16NEON(&dst[0], a, &x[0], n)
	}
	if n < len(dst) {
		axpyF16Generic(dst[n:], a, x[n:])
	}
}

func f32ToF16Arch(dst []uint16, src []float32) {
	n := len(dst) &^ 3
	if n > 0 {
		f32ToF16NEON(&dst[0], &src[0], n)
	}
	if n < len(dst) {
		f32ToF16Generic(dst[n:], src[n:])
	}
}

func f16ToF32Arch(dst []float32, src []uint16) {
	n := len(dst) &^ 3
	if n > 0 {
		f16ToF32NEON(&dst[0], &src[0], n)
	}
	if n < len(dst) {
		f16ToF32Generic(dst[n:], src[n:])
	}
}

// SwiGLU has no NEON version yet: the generic one runs.
func swiGLUArch(dst, gate, up []float32) { swiGLUGeneric(dst, gate, up) }

// The attention row loops call the NEON row kernels one row at a time.
func dotF16RowsArch(dst []float32, k []uint16, stride int, q []float32, scale float32) {
	for i := range dst {
		dst[i] = dotF16Arch(k[i*stride:i*stride+len(q)], q) * scale
	}
}

func axpyF16RowsArch(out []float32, p []float32, v []uint16, stride int) {
	for i, a := range p {
		axpyF16Arch(out, a, v[i*stride:i*stride+len(out)])
	}
}

func softmaxExpArch(x []float32, m float32, acc *[8]float64) { softmaxExpGeneric(x, m, acc) }

func dotF16Rows2Arch(dst0, dst1 []float32, k []uint16, stride int, q0, q1 []float32, scale float32) {
	dotF16RowsArch(dst0, k, stride, q0, scale)
	dotF16RowsArch(dst1, k, stride, q1, scale)
}
