//go:build !amd64

package kernels

// tileRows and tileCols size MatMulF32's tiles on amd64; elsewhere it uses
// the row dot product.
const tileRows, tileCols = 4, 6

// f32Tiles: no float32 register tiles on this architecture.
func f32Tiles() *[tileRows][tileCols]func(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, k int, acc int) {
	return nil
}
