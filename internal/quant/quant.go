package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// dequantFunc expands whole blocks of src into dst; the caller has checked
// that len(src) is a whole number of blocks and len(dst) matches it.
type dequantFunc func(src []byte, dst []float32)

// quantFunc encodes src (a whole number of blocks) into dst (exactly sized).
type quantFunc func(src []float32, dst []byte)

var dequantizers = map[Type]dequantFunc{}

var quantizers = map[Type]quantFunc{}

// CanQuantize reports whether Quantize supports t.
func CanQuantize(t Type) bool { _, ok := quantizers[t]; return ok }

// CanDequantize reports whether Dequantize supports t.
func CanDequantize(t Type) bool { _, ok := dequantizers[t]; return ok }

// Dequantize expands src, a whole number of blocks of type t, into dst, which
// must hold exactly the number of values those blocks encode. The result is
// bit-identical to ggml's to_float for the type.
func Dequantize(t Type, src []byte, dst []float32) error {
	f, ok := dequantizers[t]
	if !ok {
		return fmt.Errorf("quant: dequantizing %s is not supported", t)
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if len(src)%ts != 0 {
		return fmt.Errorf("quant: %s: %d bytes is not a whole number of %d-byte blocks", t, len(src), ts)
	}
	if want := len(src) / ts * bs; len(dst) != want {
		return fmt.Errorf("quant: %s: %d bytes decode to %d values, but dst holds %d", t, len(src), want, len(dst))
	}
	f(src, dst)
	return nil
}

// Quantize encodes src into dst as type t. len(src) must be a whole number of
// blocks and len(dst) exactly the bytes they take (t.RowBytes). For Q8_0, Q8_1
// and Q8_K the bytes are identical to those llama.cpp's x86 CPU backend
// produces when it quantizes activations for its dot products.
func Quantize(t Type, src []float32, dst []byte) error {
	f, ok := quantizers[t]
	if !ok {
		return fmt.Errorf("quant: quantizing to %s is not supported", t)
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if len(src)%bs != 0 {
		return fmt.Errorf("quant: %s: %d values is not a whole number of %d-value blocks", t, len(src), bs)
	}
	if want := len(src) / bs * ts; len(dst) != want {
		return fmt.Errorf("quant: %s: %d values encode to %d bytes, but dst holds %d", t, len(src), want, len(dst))
	}
	f(src, dst)
	return nil
}

// Little-endian field access; GGUF data is always little-endian.

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }

func f16at(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }

func f32at(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

func putF32(b []byte, f float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(f)) }

// roundEven rounds to the nearest integer, ties to even: what both the SSE
// round instruction in nearest mode and ggml's nearest_int compute. Adding
// 1.5*2^23 leaves the rounded integer in the low mantissa bits (valid for
// |f| < 2^22, far beyond any quant level); the float32 addition rounds to
// nearest even by IEEE rules on every architecture.
func roundEven(f float32) int32 {
	return int32(math.Float32bits(f+12582912)) - 0x4B400000
}

// absMax returns the largest |x| of a block (0 for an all-zero block). For
// non-negative floats the bit patterns order like the values, so clearing the
// sign bit and comparing integers avoids float compares; NaNs, which ggml's
// max ignores, are skipped.
func absMax(x []float32) float32 {
	var m uint32
	for _, v := range x {
		if a := math.Float32bits(v) &^ (1 << 31); a > m && a <= 0x7f800000 {
			m = a
		}
	}
	return math.Float32frombits(m)
}
