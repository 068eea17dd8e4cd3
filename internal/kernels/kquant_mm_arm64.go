package kernels

import "braid/internal/quant"

//go:generate sh -c "python3 kquant_mm_arm64_gen.py > kquant_mm_arm64.s"

// NEON multi-column tiles for Q4_K and Q6_K (kquant_mm_arm64.s, generated
// by kquant_mm_arm64_gen.py): one weight row by up to 4 columns of plain
// Q8_K activations, so they plug in as dotImpl.mm (MatMul converts the
// activations as for the row dot) and every edge has its own width.

//go:noescape
func kqmmQ4KNEONC1(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, nb int)

//go:noescape
func kqmmQ4KNEONC2(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, nb int)

//go:noescape
func kqmmQ4KNEONC3(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, nb int)

//go:noescape
func kqmmQ4KNEONC4(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, nb int)

//go:noescape
func kqmmQ6KNEONC1(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, nb int)

//go:noescape
func kqmmQ6KNEONC2(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, nb int)

//go:noescape
func kqmmQ6KNEONC3(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, nb int)

//go:noescape
func kqmmQ6KNEONC4(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, nb int)

var (
	kqmmQ4KNEONTab = [][]kqTileFunc{{kqmmQ4KNEONC1, kqmmQ4KNEONC2, kqmmQ4KNEONC3, kqmmQ4KNEONC4}}
	kqmmQ6KNEONTab = [][]kqTileFunc{{kqmmQ6KNEONC1, kqmmQ6KNEONC2, kqmmQ6KNEONC3, kqmmQ6KNEONC4}}
)

func mmQ4KNEON(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int) {
	kqTile(kqmmQ4KNEONTab, kqQ4KSize, kqQ8KSize, n, w, ldw, x, ldx, dst, ldd, rows, cols)
}

func mmQ6KNEON(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int) {
	kqTile(kqmmQ6KNEONTab, kqQ6KSize, kqQ8KSize, n, w, ldw, x, ldx, dst, ldd, rows, cols)
}

// init runs after kquant_arm64.go's (files initialise in name order) and
// attaches the tiles to the neon-dotprod candidates registered there, which
// exist only on CPUs with SDOT.
func init() {
	for _, t := range []struct {
		typ quant.Type
		mm  func(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int)
	}{{quant.Q4_K, mmQ4KNEON}, {quant.Q6_K, mmQ6KNEON}} {
		for _, d := range fast[t.typ] {
			if d.name == "neon-dotprod" {
				d.mm, d.mmRows, d.mmCols = t.mm, 1, 4
			}
		}
	}
}
