package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"braid/internal/quant"
)

// kqTiled returns the candidates of typ (this CPU's) that have a K-quant
// tile: mmWide ones take the tile activation layout through wideAct, mm
// ones plain Q8_K.
func kqTiled(typ quant.Type) []*dotImpl {
	var out []*dotImpl
	for _, d := range fast[typ] {
		if d.mmWide != nil || d.mm != nil {
			out = append(out, d)
		}
	}
	return out
}

// kqTileRun calls impl's tile on Q8_K activation vectors xs, laid out as
// MatMul would for it.
func kqTileRun(impl *dotImpl, typ quant.Type, n int, w []byte, ldw int, xs [][]byte, dst []float32, ldd, rows int) {
	if impl.mmWide == nil {
		ldx := n / 256 * kqQ8KSize
		x := make([]byte, 0, len(xs)*ldx)
		for _, xc := range xs {
			x = append(x, xc...)
		}
		impl.mm(n, w, ldw, x, ldx, dst, ldd, rows, len(xs))
		return
	}
	ldx := 4 * n
	x := make([]byte, len(xs)*ldx)
	for j, xc := range xs {
		for b := 0; b < n/256; b++ {
			kqTileBlock(x[j*ldx+b*kqTileSize:], xc[b*kqQ8KSize:(b+1)*kqQ8KSize])
		}
	}
	impl.mmWide(n, w, ldw, x, ldx, dst, ldd, rows, len(xs))
}

// kqTileBlock lays out one Q8_K block y in the tile layout, from the
// layout's definition (kquant_mm.go).
func kqTileBlock(t, y []byte) {
	_ = t[kqTileSize-1]
	_ = y[kqQ8KSize-1]
	qs := y[kqQ8KQS : kqQ8KQS+256]
	le := binary.LittleEndian
	for g := 0; g < 16; g++ {
		// Four-byte moves (copy would call memmove for each).
		for k := 0; k < 4; k++ {
			le.PutUint32(t[64*k+4*g:], le.Uint32(qs[16*g+4*k:]))
		}
	}
	d := kqF32(y)
	for g := 0; g < 16; g++ {
		bs := kqI16(y[kqQ8KBsums+2*g:])
		binary.LittleEndian.PutUint32(t[kqTileExtra+4*g:], math.Float32bits(d*float32(bs)))
	}
	binary.LittleEndian.PutUint32(t[kqTileD:], math.Float32bits(d))
}

// TestKQuantTileVsDot checks every tile shape (full and edge) against the
// reference row dot for every row and column: random, raw (-128 included),
// extreme-scale and zero data. The integer sums are exact in both; the
// float combination differs in order only, so the tolerance is that of
// TestKQuantFastVsRef, and all-zero blocks must give exactly zero.
func kqTileRowCounts(most int) []int {
	var out []int
	for _, r := range []int{1, 2, 3, 4, 7, 17, most - 1, most} {
		if r >= 1 && r <= most && (len(out) == 0 || r > out[len(out)-1]) {
			out = append(out, r)
		}
	}
	return out
}

func TestKQuantTileVsDot(t *testing.T) {
	for _, typ := range kqTypes {
		for _, impl := range kqTiled(typ) {
			for _, c := range kqCases(true) {
				// Every row count up to 4, then a few up to the chunk MatMul
				// gives (amd64's tiles loop over the rows in assembly).
				for _, rows := range kqTileRowCounts(impl.mmRows) {
					for cols := 1; cols <= impl.mmCols; cols++ {
						name := fmt.Sprintf("%s/%s/%s/%dx%d", typ, impl.name, c.name, rows, cols)
						r := kqRand(name)
						ldw := c.n / 256 * typ.TypeSize()
						ldd := rows + 3
						w := make([]byte, 0, rows*ldw)
						for i := 0; i < rows; i++ {
							w = append(w, kqRandWeights(r, typ, c.n/256, c.wmode)...)
						}
						xs := make([][]byte, cols)
						for j := range xs {
							xs[j] = kqRandActs(r, c.n, c.xmode)
						}
						dst := make([]float32, cols*ldd)
						for i := range dst {
							dst[i] = float32(math.NaN()) // untouched slots stay NaN
						}
						kqTileRun(impl, typ, c.n, w, ldw, xs, dst, ldd, rows)
						for j := 0; j < cols; j++ {
							for i := 0; i < ldd; i++ {
								got := dst[j*ldd+i]
								if i >= rows {
									if !math.IsNaN(float64(got)) {
										t.Fatalf("%s: wrote dst[%d,%d] outside the tile", name, j, i)
									}
									continue
								}
								wi := w[i*ldw : (i+1)*ldw]
								want := generic[typ].dot(c.n, wi, xs[j])
								if c.wmode == "zero" {
									if got != 0 {
										t.Fatalf("%s: [%d,%d] = %g, want 0", name, j, i, got)
									}
									continue
								}
								tol := 1e-6*kqMagnitude(typ, wi, xs[j], c.n) + 1e-30
								if math.Abs(float64(got)-float64(want)) > tol {
									t.Fatalf("%s: [%d,%d] = %.9g, reference %.9g (diff %.3g > tol %.3g)", name, j, i, got, want, got-want, tol)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestKQuantTileLayout checks the activation converter against the
// layout's definition on quant.Quantize's Q8_K bytes, on blocks of normal
// values with an outlier, tiny and huge scales, an all-zero block, values
// on rounding ties and blocks with NaNs and infinities.
func TestKQuantTileLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const nb = 8
	src := make([]float32, nb*256)
	for i := range src {
		src[i] = float32(r.NormFloat64())
	}
	src[7] = -30
	for i := 256; i < 512; i++ {
		src[i] *= 1e-30
	}
	for i := 512; i < 768; i++ {
		src[i] *= 1e30
	}
	clear(src[768:1024])
	for i := 1024; i < 1280; i++ {
		src[i] = float32(i%255-127) / 2 // x.5 ties once scaled by 1
	}
	src[1024] = 127
	src[1300] = float32(math.NaN())
	src[1600] = float32(math.Inf(-1))
	q := make([]byte, nb*kqQ8KSize)
	if err := quant.Quantize(quant.Q8_K, src, q); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 4*len(src))
	kqTileAct(dst, src)
	want := make([]byte, kqTileSize)
	for b := 0; b < nb; b++ {
		clear(want)
		kqTileBlock(want, q[b*kqQ8KSize:(b+1)*kqQ8KSize])
		got := dst[b*kqTileSize : (b+1)*kqTileSize]
		for i := 0; i < kqTileD+4; i++ {
			if got[i] != want[i] {
				t.Fatalf("block %d byte %d: %#x, the layout of quant.Quantize's Q8_K gives %#x", b, i, got[i], want[i])
			}
		}
	}
	// The layout's definition itself, on the first block.
	y, tb := q, dst
	for e := 0; e < 256; e++ {
		g, k, i := e/16, (e%16)/4, e%4
		if tb[64*k+4*g+i] != y[kqQ8KQS+e] {
			t.Fatalf("value %d misplaced", e)
		}
	}
	d := kqF32(y)
	if kqF32(tb[kqTileD:]) != d {
		t.Fatalf("d")
	}
	for g := 0; g < 16; g++ {
		bs := kqI16(y[kqQ8KBsums+2*g:])
		if got := kqF32(tb[kqTileExtra+4*g:]); got != d*float32(bs) {
			t.Fatalf("extra %d = %g, want d*bsum = %g", g, got, d*float32(bs))
		}
	}
}

// TestMatMulKQuant compares MatMul for the K-quants at batch sizes of
// batched decode and prefill with a float64 loop over the dequantized
// weights and Q8_K activations, on ragged row counts and several threads.
func TestMatMulKQuant(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	type shape struct{ rows, cols, n int }
	var shapes []shape
	for _, n := range []int{2, 3, 4, 5, 8, 17} {
		shapes = append(shapes, shape{37, 512, n})
	}
	shapes = append(shapes, shape{131, 256, 8}, shape{9, 768, 512})
	for _, threads := range []int{1, 3} {
		p := NewPool(threads)
		for _, typ := range kqTypes {
			for _, s := range shapes {
				w := &Matrix{Type: typ, Rows: s.rows, Cols: s.cols, Data: kqRandWeights(rng, typ, s.rows*s.cols/256, "rand")}
				x := make([]float32, s.n*s.cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				x[rng.IntN(len(x))] = 25
				dst := make([]float32, s.n*s.rows)
				p.MatMul(dst, w, x, s.n)
				ldw := s.cols / 256 * typ.TypeSize()
				for j := 0; j < s.n; j++ {
					xq := make([]byte, s.cols/256*kqQ8KSize)
					if err := quant.Quantize(quant.Q8_K, x[j*s.cols:(j+1)*s.cols], xq); err != nil {
						t.Fatal(err)
					}
					for i := 0; i < s.rows; i++ {
						wi := w.Data[i*ldw : (i+1)*ldw]
						want := kqDot64(typ, wi, xq, s.cols)
						tol := 2e-6*kqMagnitude(typ, wi, xq, s.cols) + 1e-30
						if got := dst[j*s.rows+i]; math.Abs(float64(got)-want) > tol {
							t.Fatalf("threads=%d %s %dx%d n=%d: dst[%d,%d] = %.9g, want %.9g (tol %.3g)", threads, typ, s.rows, s.cols, s.n, j, i, got, want, tol)
						}
					}
				}
			}
		}
		p.Close()
	}
}

// BenchmarkKQuantTile times one tile shape on data that stays in L1/L2
// (the kernel's compute speed): ns/op is per row, column and 256-value
// block, the unit the tile's instruction count is designed in.
func BenchmarkKQuantTile(b *testing.B) {
	for _, typ := range kqTypes {
		for _, impl := range kqTiled(typ) {
			if impl.mmWide == nil {
				continue // plain-Q8_K tiles: timed through BenchmarkMatMul
			}
			for _, sh := range [][2]int{{impl.mmRows, impl.mmCols}, {1, 4}, {1, 1}} {
				rows, cols, n := sh[0], sh[1], 2048
				b.Run(fmt.Sprintf("%s/%dx%d", typ, rows, cols), func(b *testing.B) {
					r := rand.New(rand.NewPCG(1, 2))
					ldw, ldx := n/256*typ.TypeSize(), 4*n
					w := kqRandWeights(r, typ, rows*n/256, "rand")
					src := make([]float32, n)
					for i := range src {
						src[i] = float32(r.NormFloat64())
					}
					x := make([]byte, cols*ldx)
					for c := 0; c < cols; c++ {
						impl.wideAct(x[c*ldx:(c+1)*ldx], src)
					}
					dst := make([]float32, cols*rows)
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						impl.mmWide(n, w, ldw, x, ldx, dst, rows, rows, cols)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows*cols*n/256), "ns/rcb")
				})
			}
		}
	}
}

// BenchmarkKQuantTileStream times the tiles as batched decode runs them:
// 8 columns, in MatMul's chunks of rows, over 16 Mi weights (more
// than L2, so they stream) for a short (2048) and a long (8192) row; ns/rcb
// is per row, column and 256-value block as in BenchmarkKQuantTile.
func BenchmarkKQuantTileStream(b *testing.B) {
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K} {
		for _, impl := range kqTiled(typ) {
			if impl.mmWide == nil {
				continue
			}
			for _, n := range []int{2048, 8192} {
				rows, cols := (16<<20)/n, 8
				b.Run(fmt.Sprintf("%s/n=%d", typ, n), func(b *testing.B) {
					r := rand.New(rand.NewPCG(1, 2))
					ldw, ldx := n/256*typ.TypeSize(), 4*n
					w := kqRandWeights(r, typ, rows*n/256, "rand")
					src := make([]float32, n)
					x := make([]byte, cols*ldx)
					for c := 0; c < cols; c++ {
						for i := range src {
							src[i] = float32(r.NormFloat64())
						}
						impl.wideAct(x[c*ldx:(c+1)*ldx], src)
					}
					dst := make([]float32, cols*rows)
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						for r0 := 0; r0 < rows; r0 += impl.mmRows {
							impl.mmWide(n, w[r0*ldw:], ldw, x, ldx, dst[r0:], rows, min(impl.mmRows, rows-r0), cols)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows*cols*n/256), "ns/rcb")
				})
			}
		}
	}
}
