package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"runtime"
	"strings"
	"testing"

	"braid/internal/quant"
)

// raw assembles files byte by byte, so tests can say things a Writer
// refuses to.
type raw struct{ b []byte }

func (r *raw) u32(x uint32) *raw   { r.b = binary.LittleEndian.AppendUint32(r.b, x); return r }
func (r *raw) u64(x uint64) *raw   { r.b = binary.LittleEndian.AppendUint64(r.b, x); return r }
func (r *raw) bytes(s string) *raw { r.b = append(r.b, s...); return r }
func (r *raw) str(s string) *raw   { return r.u64(uint64(len(s))).bytes(s) }

// header starts a file: magic, version 3, counts.
func header(nt, nkv uint64) *raw {
	return (&raw{}).bytes("GGUF").u32(3).u64(nt).u64(nkv)
}

// tensor appends a tensor info.
func (r *raw) tensor(name string, typ quant.Type, off uint64, dims ...uint64) *raw {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	return r.u32(uint32(typ)).u64(off)
}

// data pads to 32 and appends n bytes of tensor data.
func (r *raw) data(n int) *raw {
	for len(r.b)%32 != 0 {
		r.b = append(r.b, 0)
	}
	r.b = append(r.b, make([]byte, n)...)
	return r
}

// kvU32 appends a uint32 metadata entry.
func (r *raw) kvU32(key string, x uint32) *raw {
	return r.str(key).u32(uint32(TypeUint32)).u32(x)
}

func TestCorruptions(t *testing.T) {
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "truncated at byte 0 reading magic"},
		{"wrong magic", (&raw{}).bytes("GGML").u32(3).b, `not a GGUF file: magic is "GGML"`},
		{"lower-case magic", (&raw{}).bytes("gguf").u32(3).b, `magic is "gguf"`},
		{"version 1", (&raw{}).bytes("GGUF").u32(1).b, "GGUF version 1 is not supported"},
		{"version 4", (&raw{}).bytes("GGUF").u32(4).b, "unsupported GGUF version 4"},
		{"version 0", (&raw{}).bytes("GGUF").u32(0).b, "unsupported GGUF version 0"},
		{"big-endian", (&raw{}).bytes("GGUF").u32(0x03000000).b, "big-endian GGUF file (version 3)"},
		{"truncated version", (&raw{}).bytes("GGUF").u32(3).b[:6], "truncated at byte 4 reading version: need 4 bytes, 2 left"},
		{"huge tensor count", (&raw{}).bytes("GGUF").u32(3).u64(math.MaxUint64).u64(0).b, "tensor count is 18446744073709551615"},
		{"huge kv count", header(0, 1<<40).b, "metadata count is 1099511627776 at byte 16, but only 0 bytes are left"},
		{"huge key length", header(0, 1).u64(1 << 62).bytes("abcdefgh").b, "metadata key 0 length is 4611686018427387904"},
		{"huge string length", header(0, 1).str("general.name").u32(uint32(TypeString)).u64(math.MaxUint64).b,
			`value of key "general.name" length is 18446744073709551615`},
		{"truncated string", header(0, 1).str("k").u32(uint32(TypeString)).u64(10).bytes("abc").b,
			`value of key "k" length is 10 at byte 37, but only 3 bytes are left: truncated or corrupt`},
		{"huge array length", header(0, 1).str("tokens").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(1 << 60).b,
			`value of key "tokens" array length is 1152921504606846976`},
		{"huge array of uint64", header(0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeUint64)).u64(3).u64(1).b,
			"array length is 3 at byte 41, but only 8 bytes are left (each needs at least 8): truncated or corrupt"},
		{"huge string in array", header(0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(1).u64(1 << 50).b,
			`value of key "a" element 0 length is 1125899906842624`},
		{"unknown value type", header(0, 1).str("k").u32(13).u32(0).b, `value of key "k": unknown value type 13`},
		{"unknown element type", header(0, 1).str("k").u32(uint32(TypeArray)).u32(99).u64(0).b, `unknown array element type 99`},
		{"arrays too deep", func() []byte {
			r := header(0, 1).str("deep").u32(uint32(TypeArray))
			for range 20 {
				r.u32(uint32(TypeArray)).u64(1)
			}
			return r.u32(uint32(TypeUint8)).u64(0).b
		}(), "arrays nested more than 16 deep"},
		{"duplicate key", header(0, 2).kvU32("a", 1).kvU32("a", 2).b, `metadata key "a" at byte 41 is a duplicate of entry 0`},
		{"alignment not a power of two", header(0, 1).kvU32("general.alignment", 48).b, "general.alignment is 48 (uint32), want a power of two"},
		{"alignment zero", header(0, 1).kvU32("general.alignment", 0).b, "general.alignment is 0"},
		{"alignment a string", header(0, 1).str("general.alignment").u32(uint32(TypeString)).str("32").b, `general.alignment is "32" (string)`},
		{"tensor count too big", header(2, 0).tensor("a", quant.F32, 0, 1).b, "tensor count is 2 at byte 8, but only 41 bytes are left (each needs at least 32)"},
		{"five dims", header(1, 0).tensor("t", quant.F32, 0, 1, 1, 1, 1, 1).data(4).b, `tensor "t": 5 dimensions (want 1 to 4)`},
		{"zero dims", header(1, 0).tensor("t", quant.F32, 0).u64(0).data(4).b, `tensor "t": 0 dimensions`},
		{"huge n_dims", header(1, 0).str("t").u32(math.MaxUint32).u64(0).u64(0).u64(0).b, `tensor "t": 4294967295 dimensions`},
		{"zero dim", header(1, 0).tensor("t", quant.F32, 0, 4, 0).data(16).b, `tensor "t": dimension 1 is 0`},
		{"negative dim", header(1, 0).tensor("t", quant.F32, 0, 4, math.MaxUint64).data(16).b, `tensor "t": dimension 1 is -1`},
		{"element overflow", header(1, 0).tensor("t", quant.F32, 0, 1<<32, 1<<31, 2).data(16).b, `tensor "t": shape [4294967296 2147483648] overflows the element count`},
		{"byte overflow", header(1, 0).tensor("t", quant.F64, 0, 1<<31, 1<<31).data(16).b, `tensor "t": shape [2147483648 2147483648] of F64 overflows the byte size`},
		{"unknown tensor type", header(1, 0).tensor("t", 99, 0, 4).data(16).b, `tensor "t": unknown tensor type 99`},
		{"partial block", header(1, 0).tensor("t", quant.Q4_K, 0, 255, 2).data(288).b, `tensor "t": shape [255 2]: rows of 255 values are not whole Q4_K blocks of 256`},
		{"unaligned offset", header(1, 0).tensor("blk.0.attn_q.weight", quant.F32, 123, 4).data(200).b,
			`tensor "blk.0.attn_q.weight": offset 123 is not a multiple of alignment 32`},
		{"tensor past end", header(1, 0).tensor("t", quant.F32, 32, 16).data(64).b,
			`tensor "t": data at offset 32, 64 bytes (F32 [16]), runs past the end of the file: the data section has 64 bytes`},
		{"huge offset", header(1, 0).tensor("t", quant.F32, 1<<63, 16).data(64).b, `tensor "t": offset 9223372036854775808 is out of range`},
		{"offset near max", header(1, 0).tensor("t", quant.F32, math.MaxInt64-30, 16).data(64).b, "is not a multiple of alignment 32"},
		{"aligned offset near max", header(1, 0).tensor("t", quant.F32, math.MaxInt64-63, 16).data(64).b, "runs past the end of the file"},
		{"missing data section", header(1, 0).tensor("t", quant.F32, 0, 16).b, "truncated: data section starts at byte 64 (header ends at 57, alignment 32), but the file has 57 bytes"},
		{"overlap", header(2, 0).tensor("a", quant.F32, 0, 16).tensor("b", quant.F32, 32, 16).data(128).b,
			`tensor "b" (offset 32) overlaps tensor "a" (offset 0, 64 bytes)`},
		{"same offset", header(2, 0).tensor("a", quant.F32, 0, 1).tensor("b", quant.F32, 0, 1).data(64).b, `overlaps tensor`},
		{"duplicate tensor", header(2, 0).tensor("a", quant.F32, 0, 1).tensor("a", quant.F32, 32, 1).data(64).b,
			`tensor 1: name "a" is a duplicate of tensor 0`},
		{"truncated tensor info", header(1, 0).str("tensor.name").u32(3).u64(4).u64(4).b, `truncated at byte 63 reading tensor "tensor.name" dimension 2: need 8 bytes, 0 left`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("bad.gguf", tt.file)
			if err == nil {
				t.Fatalf("parsed: %d KVs, %d tensors; want an error containing %q", len(f.KVs), len(f.Tensors), tt.want)
			}
			if !strings.HasPrefix(err.Error(), "gguf: bad.gguf: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n  %v\nwant it to name the file and contain:\n  %s", err, tt.want)
			}
		})
	}
}

// TestAcceptedOddities pins what the reader takes that a strict reading of
// the spec might not: these occur in real files or cost nothing to accept.
func TestAcceptedOddities(t *testing.T) {
	tests := []struct {
		name string
		file []byte
	}{
		{"no tensors, no padding", header(0, 1).kvU32("a", 1).b},
		{"invalid UTF-8 key and string", header(0, 1).str("\xff").u32(uint32(TypeString)).str("\xfe\x00").b},
		{"empty key and tensor name", header(1, 1).kvU32("", 1).tensor("", quant.F32, 0, 1).data(4).b},
		{"bool byte 2", header(0, 1).str("b").u32(uint32(TypeBool)).bytes("\x02").b},
		{"alignment as uint64", header(0, 1).str("general.alignment").u32(uint32(TypeUint64)).u64(64).b},
		{"trailing bytes", header(1, 0).tensor("t", quant.F32, 0, 1).data(100).b},
		{"gap between tensors", header(2, 0).tensor("a", quant.F32, 64, 1).tensor("b", quant.F32, 0, 1).data(100).b},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("odd.gguf", tt.file)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, f)
		})
	}
}

// roundTrip writes a parsed file again and checks the copy parses to the
// same metadata and tensors: the writer must take whatever the reader does.
func roundTrip(t testing.TB, f *File) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := writerFrom(t, f).WriteTo(&buf); err != nil {
		t.Fatalf("rewriting a parsed file: %v", err)
	}
	g, err := Parse("copy.gguf", buf.Bytes())
	if err != nil {
		t.Fatalf("parsing the rewritten file: %v", err)
	}
	if g.Version != f.Version || g.Alignment != f.Alignment || len(g.KVs) != len(f.KVs) || len(g.Tensors) != len(f.Tensors) {
		t.Fatalf("copy differs: version %d/%d alignment %d/%d KVs %d/%d tensors %d/%d",
			g.Version, f.Version, g.Alignment, f.Alignment, len(g.KVs), len(f.KVs), len(g.Tensors), len(f.Tensors))
	}
	for i := range f.KVs {
		if g.KVs[i].Key != f.KVs[i].Key || !g.KVs[i].Value.Equal(f.KVs[i].Value) {
			t.Fatalf("KV %d: %q=%v became %q=%v", i, f.KVs[i].Key, f.KVs[i].Value, g.KVs[i].Key, g.KVs[i].Value)
		}
	}
	for i := range f.Tensors {
		a, b := &f.Tensors[i], &g.Tensors[i]
		if a.Name != b.Name || a.Type != b.Type || a.Size != b.Size || len(a.Shape) != len(b.Shape) || !bytes.Equal(f.TensorData(i), g.TensorData(i)) {
			t.Fatalf("tensor %d: %+v became %+v", i, *a, *b)
		}
	}
}

// TestTruncations cuts a valid file at every length: each cut that loses
// header or tensor bytes must be reported as such, never parsed or panicked on.
func TestTruncations(t *testing.T) {
	data := writeBytes(t, sampleWriter(t, 3, 0))
	f, err := Parse("whole.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for _, ti := range f.Tensors {
		end = max(end, f.DataOffset+ti.Offset+ti.Size)
	}
	for n := range len(data) {
		_, err := Parse("cut.gguf", data[:n])
		switch {
		case int64(n) >= end:
			if err != nil {
				t.Errorf("cut at %d (after the last tensor, at %d): %v", n, end, err)
			}
		case err == nil:
			t.Fatalf("cut at %d of %d parsed without error", n, len(data))
		case !strings.Contains(err.Error(), "truncated") && !strings.Contains(err.Error(), "runs past the end of the file"):
			t.Errorf("cut at %d: %v", n, err)
		}
	}
}

// TestByteFlips flips every byte of the header of a valid file: the
// reader must never panic, and whatever it accepts must round-trip.
func TestByteFlips(t *testing.T) {
	data := writeBytes(t, sampleWriter(t, 3, 0))
	f, err := Parse("whole.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	mut := make([]byte, len(data))
	for i := range int(f.DataOffset) {
		for _, x := range []byte{0xFF, 0x80, 0x01} {
			copy(mut, data)
			mut[i] ^= x
			if g, err := Parse("flip.gguf", mut); err == nil {
				roundTrip(t, g)
			}
		}
	}
}

// TestAllocationBounded checks that hostile counts cost memory in
// proportion to the file, not to what the file claims.
func TestAllocationBounded(t *testing.T) {
	nest := header(0, 1).str("n").u32(uint32(TypeArray))
	for range maxDepth - 1 {
		nest.u32(uint32(TypeArray)).u64(1 << 40)
	}
	files := map[string][]byte{
		"kv count":     header(0, math.MaxUint64/2).bytes(strings.Repeat("x", 1000)).b,
		"tensor count": header(math.MaxUint64/2, 0).bytes(strings.Repeat("x", 1000)).b,
		"strings":      header(0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(1 << 40).bytes(strings.Repeat("\x00", 1000)).b,
		"nested":       nest.bytes(strings.Repeat("\x00", 1000)).b,
		"many empties": header(0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeArray)).u64(1000).bytes(strings.Repeat("\x00", 12*1000)).b,
	}
	for name, data := range files {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			Parse("hostile.gguf", data)
		}
		runtime.ReadMemStats(&after)
		allocs := int64(after.TotalAlloc-before.TotalAlloc) / 10
		if limit := int64(64*len(data) + 4096); allocs > limit {
			t.Errorf("%s: %d-byte file allocated %d bytes per parse (limit %d)", name, len(data), allocs, limit)
		}
	}
}
