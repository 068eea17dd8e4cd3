package kernels

import (
	"fmt"
	"unsafe"
)

// MatMulF32 sets dst[j*ldd+i] = Σ_{t<k} x[j*ldx+t]·w[i*ldw+t] for j < n and
// i < rows, adding to what dst holds when acc is set: a product of two
// float32 matrices held as rows (strides in values), both read along k.
// It is for the small products a layer computes from its own activations
// (DeltaNet's chunked recurrence, a few dozen rows by a few dozen), so it
// runs on the calling goroutine, from inside a Pool.For worker, and does
// not allocate. It uses the register tiles of float32 weights where this
// CPU has them (each x row loaded once for four w rows, each w row once
// for six x rows), else the row dot product.
func MatMulF32(dst []float32, ldd int, x []float32, ldx, n int, w []float32, ldw, rows, k int, acc bool) {
	if n <= 0 || rows <= 0 {
		return
	}
	if k <= 0 || ldx < k || ldw < k || ldd < rows && n > 1 ||
		len(x) < (n-1)*ldx+k || len(w) < (rows-1)*ldw+k || len(dst) < (n-1)*ldd+rows {
		panic(fmt.Sprintf("kernels: MatMulF32 of %d x %d by %d x %d (k %d; strides %d, %d, %d) with %d, %d and %d values",
			n, k, rows, k, k, ldx, ldw, ldd, len(x), len(w), len(dst)))
	}
	if t := f32Tiles(); t != nil {
		a := 0
		if acc {
			a = 1
		}
		for c := 0; c < n; c += tileCols {
			nc := min(tileCols, n-c)
			for r := 0; r < rows; r += tileRows {
				nr := min(tileRows, rows-r)
				t[nr-1][nc-1]((*byte)(unsafe.Pointer(&w[r*ldw])), 4*ldw, (*byte)(unsafe.Pointer(&x[c*ldx])), 4*ldx,
					&dst[c*ldd+r], ldd, k, a)
			}
		}
		return
	}
	for j := 0; j < n; j++ {
		xr := x[j*ldx : j*ldx+k]
		d := dst[j*ldd : j*ldd+rows]
		for i := range d {
			v := DotF32(xr, w[i*ldw:i*ldw+k])
			if acc {
				v += d[i]
			}
			d[i] = v
		}
	}
}
