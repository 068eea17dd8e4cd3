//go:build !amd64 && !arm64

package kernels

var opsLevel = opsGeneric

func opsLevels() []int { return nil }

func sumSquaresArch(x []float32) float64                { return sumSquaresGeneric(x) }
func dotF32Arch(a, b []float32) float32                 { return dotF32Generic(a, b) }
func dotF16Arch(a []uint16, b []float32) float32        { return dotF16Generic(a, b) }
func axpyF32Arch(dst []float32, a float32, x []float32) { axpyF32Generic(dst, a, x) }
func axpyF16Arch(dst []float32, a float32, x []uint16)  { axpyF16Generic(dst, a, x) }
func f32ToF16Arch(dst []uint16, src []float32)          { f32ToF16Generic(dst, src) }
func f16ToF32Arch(dst []float32, src []uint16)          { f16ToF32Generic(dst, src) }
func swiGLUArch(dst, gate, up []float32)                { swiGLUGeneric(dst, gate, up) }

func dotF16RowsArch(dst []float32, k []uint16, stride int, q []float32, scale float32) {
	dotF16RowsGeneric(dst, k, stride, q, scale)
}
func axpyF16RowsArch(out []float32, p []float32, v []uint16, stride int) {
	axpyF16RowsGeneric(out, p, v, stride)
}
func softmaxExpArch(x []float32, m float32, acc *[8]float64) { softmaxExpGeneric(x, m, acc) }

func dotF16Rows2Arch(dst0, dst1 []float32, k []uint16, stride int, q0, q1 []float32, scale float32) {
	dotF16RowsArch(dst0, k, stride, q0, scale)
	dotF16RowsArch(dst1, k, stride, q1, scale)
}
