package kernels

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"braid/internal/quant"
)

// randomMatrix quantizes random rows of cols values into t.
func randomMatrix(t testing.TB, typ quant.Type, rows, cols int, rng *rand.Rand) Matrix {
	t.Helper()
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64()) * (1 + float32(i%7))
	}
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, int(rb)*rows)
	if err := quant.Quantize(typ, src, data); err != nil {
		t.Fatal(err)
	}
	return Matrix{Type: typ, Rows: rows, Cols: cols, Data: data}
}

func randomAct(t testing.TB, act quant.Type, cols int, rng *rand.Rand) ([]float32, []byte) {
	t.Helper()
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	// An extreme value makes the Q8_K scale put -128 in the codes.
	x[rng.Intn(cols)] = -9
	rb, err := act.RowBytes(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	q := make([]byte, rb)
	if err := quant.Quantize(act, x, q); err != nil {
		t.Fatal(err)
	}
	return x, q
}

// TestRepackRoundTrip: every x8 format repacks and unpacks to the same
// bytes, and the repacked matrix dequantizes (through Unpack) to the
// original values.
func TestRepackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for typ, f := range x8Generic {
		for _, shape := range [][2]int{{8, 256}, {19, 512}, {64, 2048}, {7, 256}} {
			m := randomMatrix(t, typ, shape[0], shape[1], rng)
			p, ok := Repack(m, X8)
			if ok != (shape[0] >= 8) {
				t.Fatalf("%v %v: repacked %v", typ, shape, ok)
			}
			if ok && p.Layout != X8 {
				t.Fatalf("%v %v: layout %v", typ, shape, p.Layout)
			}
			u := Unpack(p)
			if string(u.Data) != string(m.Data) {
				t.Fatalf("%v %v (%s): unpack(repack) differs from the original", typ, shape, f.name)
			}
			a, b := make([]float32, shape[0]*shape[1]), make([]float32, shape[0]*shape[1])
			if err := quant.Dequantize(typ, m.Data, a); err != nil {
				t.Fatal(err)
			}
			if err := quant.Dequantize(typ, u.Data, b); err != nil {
				t.Fatal(err)
			}
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("%v %v: value %d dequantizes to %v, was %v", typ, shape, i, b[i], a[i])
				}
			}
		}
	}
}

// TestX8DotBits: the pure-Go x8 dot and the assembly one give, for every
// row, the bits of the canonical row dot on the plain row.
func TestX8DotBits(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for typ, g := range x8Generic {
		impls := []*x8Format{g}
		if f := x8Fast[typ]; f != nil {
			impls = append(impls, f)
		}
		for _, cols := range []int{256, 1024, 4096, 16384} {
			m := randomMatrix(t, typ, 16, cols, rng)
			p, _ := Repack(m, X8)
			rb := m.rowBytes()
			for trial := 0; trial < 3; trial++ {
				_, x := randomAct(t, g.act, cols, rng)
				for _, f := range impls {
					for grp := 0; grp < 2; grp++ {
						var out [8]float32
						f.dot8(rb/f.block, p.Data[grp*8*rb:], x, &out)
						for r := 0; r < 8; r++ {
							row := grp*8 + r
							want := g.ref(cols, m.Data[row*rb:(row+1)*rb], x)
							if math.Float32bits(out[r]) != math.Float32bits(want) {
								t.Fatalf("%v %s cols %d row %d: %v, canonical dot %v", typ, f.name, cols, row, out[r], want)
							}
						}
					}
				}
			}
		}
	}
}

// TestX8CanonNearReference: the canonical arithmetic is the format's dot
// (the reference differs at most in rounding).
func TestX8CanonNearReference(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for typ, g := range x8Generic {
		ref := generic[typ]
		m := randomMatrix(t, typ, 4, 2048, rng)
		rb := m.rowBytes()
		_, x := randomAct(t, g.act, 2048, rng)
		for r := 0; r < 4; r++ {
			a := g.ref(2048, m.Data[r*rb:(r+1)*rb], x)
			b := ref.dot(2048, m.Data[r*rb:(r+1)*rb], x)
			if d := math.Abs(float64(a - b)); d > 1e-4*math.Abs(float64(b))+1e-4 {
				t.Fatalf("%v row %d: canonical %v, reference %v", typ, r, a, b)
			}
		}
	}
}

func TestLayoutString(t *testing.T) {
	for l, want := range map[Layout]string{Plain: "plain", X8: "x8", 9: "layout(9)"} {
		if got := fmt.Sprint(l); got != want {
			t.Errorf("%d: %q, want %q", l, got, want)
		}
	}
}

// TestMatMulRepacked: a repacked matrix's product, at every vector count
// up to the exact bound, gives each vector the canonical row dot's bits,
// over 1 to 3 threads and row counts with a partial group; past the bound,
// where the CPU has tiles for the type (on rows unpacked chunk by chunk)
// and the format takes them (not noTiles), it gives the plain
// matrix's tile results bit for bit, and elsewhere the x8 kernel's.
func TestMatMulRepacked(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for typ, g := range x8Generic {
		if x8Fast[typ] == nil {
			continue
		}
		for _, rows := range []int{8, 61, 200} {
			m := randomMatrix(t, typ, rows, 1024, rng)
			p, _ := Repack(m, X8)
			rb := m.rowBytes()
			for _, threads := range []int{1, 2, 3} {
				pool := NewPool(threads)
				pool.SetExactColumns(8)
				for _, n := range []int{1, 2, 3, 5, 7, 8, 9, 11, 33} {
					x := make([]float32, n*m.Cols)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					got := make([]float32, n*rows)
					pool.MatMul(got, &p, x, n)
					want := make([]float32, n*rows)
					if impl := implFor(typ); n <= 8 || x8Fast[typ].noTiles || (impl.mm == nil && impl.mmWide == nil) {
						conv, ldx := implFor(typ).vecConv(m.Cols)
						q := make([]byte, ldx)
						for v := 0; v < n; v++ {
							conv(q, x[v*m.Cols:(v+1)*m.Cols])
							for r := 0; r < rows; r++ {
								want[v*rows+r] = g.ref(m.Cols, m.Data[r*rb:(r+1)*rb], q)
							}
						}
					} else {
						pool.MatMul(want, &m, x, n)
					}
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v rows %d threads %d n %d: value %d is %v, want %v", typ, rows, threads, n, i, got[i], want[i])
						}
					}
				}
				pool.Close()
			}
		}
	}
}

// BenchmarkX8Decode: one vector by 128 MiB of weights (cold, four times
// L3) and by 192 KiB (hot, in L2), plain layout against x8, at the pool's
// threads (BRAID_THREADS); rows of 4096 values, and of 16384 (an MLA
// model's attn_output) cold.
func BenchmarkX8Decode(b *testing.B) {
	rng := rand.New(rand.NewSource(5))
	for typ := range x8Fast {
		for _, c := range []struct {
			name       string
			size, cols int
		}{{"Cold", 128 << 20, 4096}, {"Hot", 192 << 10, 4096}, {"Cold", 128 << 20, 16384}} {
			rb, _ := typ.RowBytes(int64(c.cols))
			rows := c.size / int(rb) / 8 * 8
			// The matrices are made inside the case's benchmark, so that
			// -bench runs the setup of the cases it names only.
			b.Run(fmt.Sprintf("%s/%v/%dx%d", c.name, typ, rows, c.cols), func(b *testing.B) {
				m := randomMatrix(b, typ, rows, c.cols, rng)
				p, _ := Repack(m, X8)
				x := make([]float32, c.cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				dst := make([]float32, rows)
				pool := NewPool(benchThreads())
				defer pool.Close()
				for _, l := range []struct {
					name string
					m    *Matrix
				}{{"plain", &m}, {"x8", &p}} {
					b.Run(l.name, func(b *testing.B) {
						b.SetBytes(int64(len(m.Data)))
						for i := 0; i < b.N; i++ {
							pool.MatMul(dst, l.m, x, 1)
						}
					})
				}
			})
		}
	}
}

// TestMatVecHeadsRepacked: repacked heads (the routed experts of a MoE
// decode step) give each head MatMul's bits for that head alone.
func TestMatVecHeadsRepacked(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	for typ := range x8Fast {
		for _, rows := range []int{24, 61} {
			heads := make([]Matrix, 3)
			for h := range heads {
				heads[h], _ = Repack(randomMatrix(t, typ, rows, 512, rng), X8)
			}
			for _, threads := range []int{1, 2, 4} {
				pool := NewPool(threads)
				for _, ldx := range []int{0, 512} {
					x := make([]float32, 3*512)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					got := make([]float32, 3*rows)
					pool.MatVecHeads(got, rows, heads, x, ldx)
					for h := range heads {
						want := make([]float32, rows)
						pool.MatMul(want, &heads[h], x[h*ldx:h*ldx+512], 1)
						for r := range want {
							if math.Float32bits(got[h*rows+r]) != math.Float32bits(want[r]) {
								t.Fatalf("%v rows %d threads %d ldx %d: head %d row %d is %v, MatMul %v", typ, rows, threads, ldx, h, r, got[h*rows+r], want[r])
							}
						}
					}
				}
				pool.Close()
			}
		}
	}
}

// TestX8Dot4Bits: the four-vector kernels give each vector dot8's bits.
func TestX8Dot4Bits(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for typ, f := range x8Fast {
		if f.dot8x4 == nil && f.dot8x4a == nil {
			continue
		}
		for _, cols := range []int{256, 2048, 8192} {
			m := randomMatrix(t, typ, 8, cols, rng)
			p, _ := Repack(m, X8)
			nb := m.rowBytes() / f.block
			arb, _ := f.act.RowBytes(int64(cols))
			ldx := int(arb) + 36 // a stride longer than a vector
			x := make([]byte, 4*ldx)
			for c := 0; c < 4; c++ {
				_, q := randomAct(t, f.act, cols, rng)
				copy(x[c*ldx:], q)
			}
			got := make([]float32, 4*11)
			if f.dot8x4a != nil {
				aux := make([]byte, 4*nb*f.auxBytes)
				for c := 0; c < 4; c++ {
					f.auxOf(nb, x[c*ldx:], aux[c*nb*f.auxBytes:])
				}
				f.dot8x4a(nb, p.Data, x, ldx, aux, got, 11)
			} else {
				f.dot8x4(nb, p.Data, x, ldx, got, 11)
			}
			for c := 0; c < 4; c++ {
				var want [8]float32
				f.dot8(nb, p.Data, x[c*ldx:], &want)
				for r := 0; r < 8; r++ {
					if math.Float32bits(got[c*11+r]) != math.Float32bits(want[r]) {
						t.Fatalf("%v cols %d vector %d row %d: %v, one-vector kernel %v", typ, cols, c, r, got[c*11+r], want[r])
					}
				}
			}
		}
	}
}

// BenchmarkX8Verify times a product, plain layout against x8, at the vector counts of a
// verification step (1, 4, 5 and 8 tokens): what a speculative step costs
// over a one-token step, kernel by kernel; and at 64 (a prefill chunk),
// what a vector costs where a format has no four-vector kernel (Q8_0).
func BenchmarkX8Verify(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q5_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.MXFP4, quant.Q8_0} {
		if x8Fast[typ] == nil {
			continue
		}
		m := randomMatrix(b, typ, 8192, 4096, rng)
		p, _ := Repack(m, X8)
		pool := NewPool(1)
		x := make([]float32, 64*4096)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		dst := make([]float32, 64*8192)
		for _, n := range []int{1, 3, 4, 5, 7, 8, 64} {
			for _, l := range []struct {
				name string
				m    *Matrix
			}{{"plain", &m}, {"x8", &p}} {
				b.Run(fmt.Sprintf("%v/n=%d/%s", typ, n, l.name), func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						pool.MatMul(dst, l.m, x, n)
					}
				})
			}
		}
		pool.Close()
	}
}

// BenchmarkX8Unpack times unpacking a repacked matrix's rows to the plain
// layout, as a product whose CPU has tiles for the type does chunk by
// chunk: what a prompt on x8 weights pays for the tiles.
func BenchmarkX8Unpack(b *testing.B) {
	rng := rand.New(rand.NewSource(7))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q5_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.MXFP4} {
		f := x8Generic[typ]
		if f == nil {
			continue
		}
		b.Run(typ.String(), func(b *testing.B) {
			m := randomMatrix(b, typ, 512, 4096, rng)
			rb := m.rowBytes()
			// Packed with the format's own pack, whether or not this
			// CPU repacks the type at load.
			packed := make([]byte, len(m.Data))
			for g := 0; g < m.Rows; g += 8 {
				f.pack(packed[g*rb:(g+8)*rb], m.Data[g*rb:(g+8)*rb], rb/f.block)
			}
			buf := make([]byte, 64*rb)
			b.SetBytes(int64(len(m.Data)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for r := 0; r < m.Rows; r += 64 {
					f.unpackRows(buf, packed, m.Rows, rb, r, r+64)
				}
			}
			if !bytes.Equal(buf, m.Data[len(m.Data)-64*rb:]) {
				b.Fatal("the last rows unpack to other bytes than the plain matrix's")
			}
		})
	}
}

// TestQ50Spread checks the table forms of the Q5_0 fifth-bit moves against
// the layout's definition, bit by bit, on every single bit and random
// words.
func TestQ50Spread(t *testing.T) {
	spec := func(qh uint32) (hb uint32) {
		for k := 0; k < 4; k++ {
			for i := 0; i < 4; i++ {
				hb |= (qh >> (4*k + i) & 1) << (8*i + k)
				hb |= (qh >> (16 + 4*k + i) & 1) << (8*i + 4 + k)
			}
		}
		return hb
	}
	rng := rand.New(rand.NewSource(8))
	words := []uint32{0, ^uint32(0)}
	for b := 0; b < 32; b++ {
		words = append(words, 1<<b)
	}
	for range 1000 {
		words = append(words, rng.Uint32())
	}
	for _, qh := range words {
		hb := q50Spread(qh)
		if want := spec(qh); hb != want {
			t.Fatalf("q50Spread(%#08x) = %#08x, want %#08x", qh, hb, want)
		}
		if back := q50Gather(hb); back != qh {
			t.Fatalf("q50Gather(q50Spread(%#08x)) = %#08x", qh, back)
		}
	}
}

// TestPromptPathX8 checks what doctor says of the repacked types' prompts
// against the rule the product follows (matMulWith): tiles on unpacked
// rows only where the CPU has tiles for the type and the format takes
// them at some count.
func TestPromptPathX8(t *testing.T) {
	for _, c := range Selected() {
		if LayoutFor(c.Type) != X8 {
			continue
		}
		f, impl := x8Fast[c.Type], implFor(c.Type)
		tiles := (impl.mm != nil || impl.mmWide != nil) && !f.noTiles
		if !strings.Contains(c.Prompt, "x8") || strings.Contains(c.Prompt, "unpacked for tiles") != tiles {
			t.Errorf("%s: prompt path %q; the product takes tiles on unpacked rows: %v", c.Type, c.Prompt, tiles)
		}
	}
}

// BenchmarkX8DecodeLayers streams the linear layers of a decode step of a
// Llama-3.2-1B shape (16 layers of q, k, v, o, gate, up and down; 2048
// values a row but down's 8192) in one format and the x8 layout, one
// vector, each matrix once in turn, against the same bytes as one matrix
// of 4096-value rows: what the matrices' shapes and their number cost
// against BenchmarkX8Decode/Cold's single stream.
func BenchmarkX8DecodeLayers(b *testing.B) {
	const embd, kv, ff, layers = 2048, 512, 8192, 16
	shapes := [][2]int{{embd, embd}, {kv, embd}, {kv, embd}, {embd, embd}, {ff, embd}, {ff, embd}, {embd, ff}}
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K} {
		var ms []*Matrix
		var total int
		for l := 0; l < layers; l++ {
			for _, s := range shapes {
				p, _ := Repack(*benchMatrix(typ, s[0], s[1]), X8)
				ms = append(ms, &p)
				total += len(p.Data)
			}
		}
		rb, _ := typ.RowBytes(4096)
		one, _ := Repack(*benchMatrix(typ, total/int(rb)/8*8, 4096), X8)
		x := make([]float32, ff)
		for i := range x {
			x[i] = float32(i%13) - 6
		}
		dst := make([]float32, max(ff, one.Rows))
		pool := NewPool(benchThreads())
		b.Run(fmt.Sprintf("%v/layers", typ), func(b *testing.B) {
			b.SetBytes(int64(total))
			for i := 0; i < b.N; i++ {
				for _, m := range ms {
					pool.MatMul(dst, m, x[:m.Cols], 1)
				}
			}
		})
		b.Run(fmt.Sprintf("%v/one", typ), func(b *testing.B) {
			b.SetBytes(int64(len(one.Data)))
			for i := 0; i < b.N; i++ {
				pool.MatMul(dst, &one, x[:4096], 1)
			}
		})
		pool.Close()
	}
}
