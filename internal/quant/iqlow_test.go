package quant_test

import (
	"encoding/binary"
	"hash/fnv"
	"testing"

	"braid/internal/quant"
)

// TestIQGridDigests pins the expanded codebooks to FNV-1a digests of ggml's
// tables as ggml-common.h lists them (entries little-endian, in order). The
// reference file exercises only the grid points its rows happen to use;
// this covers every entry, so an edit to the compact tables cannot pass.
func TestIQGridDigests(t *testing.T) {
	digest := func(n int, put func(b []byte, i int), size int) uint64 {
		h := fnv.New64a()
		b := make([]byte, size)
		for i := 0; i < n; i++ {
			put(b, i)
			h.Write(b)
		}
		return h.Sum64()
	}
	u64 := func(g []uint64) func([]byte, int) {
		return func(b []byte, i int) { binary.LittleEndian.PutUint64(b, g[i]) }
	}
	u32 := func(g []uint32) func([]byte, int) {
		return func(b []byte, i int) { binary.LittleEndian.PutUint32(b, g[i]) }
	}
	for _, c := range []struct {
		name string
		got  uint64
		want uint64
	}{
		{"iq2xxs_grid", digest(256, u64(quant.IQ2XXSGrid[:]), 8), 0xbb4ee025b5ac6e8e},
		{"iq2xs_grid", digest(512, u64(quant.IQ2XSGrid[:]), 8), 0xc9b1ee61e79909bd},
		{"iq2s_grid", digest(1024, u64(quant.IQ2SGrid[:]), 8), 0x123edd38a3b62b90},
		{"iq3xxs_grid", digest(256, u32(quant.IQ3XXSGrid[:]), 4), 0xdfa5dc83d6a155d5},
		{"iq3s_grid", digest(512, u32(quant.IQ3SGrid[:]), 4), 0xfa37020c25b44829},
		{"iq1s_grid", digest(2048, u64(quant.IQ1SGrid[:]), 8), 0x6703ed863501ae2e},
		{"ksigns_iq2xs", digest(128, func(b []byte, i int) { b[0] = quant.IQSigns(uint8(i)) }, 1), 0xf19ba8f8c3292ba5},
	} {
		if c.got != c.want {
			t.Errorf("%s: digest %#x, ggml's table has %#x", c.name, c.got, c.want)
		}
	}
}

// TestIQSignsParity: the implied eighth sign makes every mask's number of
// negative values even, and keeps the seven stored bits.
func TestIQSignsParity(t *testing.T) {
	for i := 0; i < 256; i++ {
		s := quant.IQSigns(uint8(i))
		n := 0
		for k := 0; k < 8; k++ {
			n += int(s >> k & 1)
		}
		if n%2 != 0 || s&127 != uint8(i)&127 {
			t.Fatalf("IQSigns(%d) = %#x", i, s)
		}
	}
}

// TestDequantizeRefIQCovered makes sure TestDequantizeRefIQ compares every
// quantized tensor of quants-iq.gguf: a tensor added to the reference set
// must not go unchecked.
func TestDequantizeRefIQCovered(t *testing.T) {
	q := loadRefAt(t, refIQDir, "quants-iq.gguf")
	listed := map[string]bool{"source": true, "act_source": true, "imatrix": true,
		"act_q8_K": true} // act_q8_K: ggml has no to_float for it (see the README)
	for _, n := range refIQTypes {
		listed[n] = true
	}
	for _, tn := range q.m.Tensors {
		if !listed[tn.Name] {
			t.Errorf("quants-iq.gguf tensor %s (%s) is not compared", tn.Name, tn.Type)
		}
	}
}

// TestDequantizeTernaryLayout pins TQ1_0's and TQ2_0's value order on
// hand-made blocks, so a layout error shows even without the shared files.
func TestDequantizeTernaryLayout(t *testing.T) {
	got := make([]float32, 256)
	// TQ2_0: byte 0 = 0b10_01_00_11 gives values 0, 32, 64, 96 codes 3, 0,
	// 1, 2; every other byte 0x55 (code 1, value 0); byte 32 codes the
	// second half.
	b := make([]byte, 66)
	for i := range b[:64] {
		b[i] = 0x55
	}
	b[0], b[32] = 0x93, 0x56
	binary.LittleEndian.PutUint16(b[64:], quant.F32ToF16(0.5))
	if err := quant.Dequantize(quant.TQ2_0, b, got); err != nil {
		t.Fatal(err)
	}
	want := map[int]float32{0: 1, 32: -0.5, 96: 0.5, 128: 0.5}
	for i, v := range got {
		if v != want[i] {
			t.Fatalf("TQ2_0 value %d: got %g want %g", i, v, want[i])
		}
	}
	// TQ1_0: a byte holds ceil(256*n/243) for the base-3 number n of its
	// digits, most significant first. 0 -> all -1; 242 (22222) -> all +1.
	// Byte 0 = ceil(256*(1*81)/243) = 86 (digits 1,0,0,0,0): value 0 is 0,
	// values 32, 64, 96, 128 are -1.
	b = make([]byte, 54)
	b[0] = 86
	b[47] = 0xff // 3^5 would overflow: 255 reads as digits 2,2,2,2,2
	b[51] = 0xff
	binary.LittleEndian.PutUint16(b[52:], quant.F32ToF16(2))
	if err := quant.Dequantize(quant.TQ1_0, b, got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		w := float32(-2)
		switch {
		case i == 0:
			w = 0
		case i >= 160 && i%16 == 15: // byte 47: value 160+16n+15
			w = 2
		case i >= 243 && i%4 == 3: // byte 51 (qh[3]): values 243, 247, 251, 255
			w = 2
		}
		if v != w {
			t.Fatalf("TQ1_0 value %d: got %g want %g", i, v, w)
		}
	}
}
