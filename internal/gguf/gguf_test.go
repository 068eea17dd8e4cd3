package gguf

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"braid/internal/quant"
)

// sampleKVs has every value type, including nested arrays and arrays of
// strings, with edge values.
func sampleKVs() []KV {
	return []KV{
		{"general.architecture", String("llama")},
		{"general.name", String("tiny ünïcode \x00 name")},
		{"u8", Uint8(200)},
		{"i8", Int8(-100)},
		{"u16", Uint16(60000)},
		{"i16", Int16(-30000)},
		{"u32", Uint32(4000000000)},
		{"i32", Int32(-2000000000)},
		{"f32", Float32(float32(math.Inf(-1)))},
		{"bool.true", Bool(true)},
		{"bool.false", Bool(false)},
		{"empty string", String("")},
		{"u64", Uint64(math.MaxUint64)},
		{"i64", Int64(math.MinInt64)},
		{"f64", Float64(math.SmallestNonzeroFloat64)},
		{"tokenizer.ggml.tokens", StringArray([]string{"<s>", "</s>", "", "▁the", "\xff not utf-8"})},
		{"tokenizer.ggml.scores", Float32Array([]float32{0, -1.5, float32(math.NaN())})},
		{"tokenizer.ggml.token_type", Int32Array([]int32{3, 3, 1, 1, 1})},
		{"u8s", Uint8Array([]uint8{1, 2, 255})},
		{"u32s", Uint32Array([]uint32{1, math.MaxUint32})},
		{"i64s", Int64Array([]int64{math.MinInt64, 0})},
		{"u64s", Uint64Array([]uint64{math.MaxUint64})},
		{"f64s", Float64Array([]float64{math.Pi})},
		{"bools", BoolArray([]bool{true, false, true})},
		{"i16s", Int16Array(-1, 1)},
		{"empty array", Array(TypeFloat32, nil)},
		{"empty strings", StringArray(nil)},
		{"nested", Array(TypeArray, []Value{
			Int32Array([]int32{1, 2}),
			StringArray([]string{"a", "bc"}),
			Array(TypeArray, []Value{Array(TypeUint16, []Value{Uint16(9)}), Array(TypeArray, nil)}),
		})},
	}
}

type sampleTensor struct {
	name  string
	typ   quant.Type
	shape []int64
}

var sampleTensors = []sampleTensor{
	{"token_embd.weight", quant.Q8_0, []int64{64, 10}},
	{"blk.0.attn_norm.weight", quant.F32, []int64{64}},
	{"blk.0.ffn_up.weight", quant.Q4_K, []int64{256, 3, 1, 2}},
	{"blk.0.odd.weight", quant.F16, []int64{3, 5}}, // 30 bytes: not a multiple of any alignment
	{"output.weight", quant.NVFP4, []int64{128, 2}},
}

// tensorBytes makes recognisable data for a tensor.
func tensorBytes(seed int, size int64) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(seed*31 + i*7 + i>>8)
	}
	return b
}

// sampleWriter builds a writer with the sample metadata and tensors.
func sampleWriter(t testing.TB, version uint32, align int64) *Writer {
	t.Helper()
	w := NewWriter()
	w.SetVersion(version)
	if align != 0 {
		w.SetAlignment(align)
	}
	for _, kv := range sampleKVs() {
		w.Set(kv.Key, kv.Value)
	}
	for i, st := range sampleTensors {
		size := tensorSize(t, st.typ, st.shape)
		if err := w.AddTensor(st.name, st.typ, st.shape, tensorBytes(i, size)); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func tensorSize(t testing.TB, ty quant.Type, shape []int64) int64 {
	rb, err := ty.RowBytes(shape[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range shape[1:] {
		rb *= d
	}
	return rb
}

func writeBytes(t testing.TB, w *Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		version uint32
		align   int64
	}{
		{3, 0}, {2, 0}, {3, 1}, {3, 8}, {3, 64}, {2, 4096},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("v%d/align%d", tt.version, tt.align), func(t *testing.T) {
			data := writeBytes(t, sampleWriter(t, tt.version, tt.align))
			f, err := Parse("sample.gguf", data)
			if err != nil {
				t.Fatal(err)
			}
			wantAlign := tt.align
			if wantAlign == 0 {
				wantAlign = DefaultAlignment
			}
			if f.Version != tt.version || f.Alignment != wantAlign {
				t.Errorf("version %d, alignment %d; want %d, %d", f.Version, f.Alignment, tt.version, wantAlign)
			}
			if f.DataOffset%wantAlign != 0 {
				t.Errorf("data offset %d is not aligned to %d", f.DataOffset, wantAlign)
			}
			want := sampleKVs()
			if tt.align != 0 {
				want = append([]KV{{"general.alignment", Uint32(uint32(tt.align))}}, want...)
			}
			if len(f.KVs) != len(want) {
				t.Fatalf("%d KVs, want %d", len(f.KVs), len(want))
			}
			for i, kv := range want {
				got := f.KVs[i]
				if got.Key != kv.Key || !got.Value.Equal(kv.Value) {
					t.Errorf("KV %d = %q: %v, want %q: %v", i, got.Key, got.Value, kv.Key, kv.Value)
				}
				if v, ok := f.Get(kv.Key); !ok || !v.Equal(kv.Value) {
					t.Errorf("Get(%q) = %v, %v", kv.Key, v, ok)
				}
			}
			if len(f.Tensors) != len(sampleTensors) {
				t.Fatalf("%d tensors, want %d", len(f.Tensors), len(sampleTensors))
			}
			for i, st := range sampleTensors {
				ti := f.Tensors[i]
				if ti.Name != st.name || ti.Type != st.typ || fmt.Sprint(ti.Shape) != fmt.Sprint(st.shape) {
					t.Errorf("tensor %d = %s %v %v, want %s %v %v", i, ti.Name, ti.Type, ti.Shape, st.name, st.typ, st.shape)
				}
				if ti.Offset%wantAlign != 0 {
					t.Errorf("%s: offset %d not aligned", ti.Name, ti.Offset)
				}
				if want := tensorBytes(i, tensorSize(t, st.typ, st.shape)); !bytes.Equal(f.TensorData(i), want) {
					t.Errorf("%s: data differs", ti.Name)
				}
			}
			// The reader's output written again must be byte-identical.
			if again := writeBytes(t, writerFrom(t, f)); !bytes.Equal(again, data) {
				t.Errorf("rewriting the parsed file changed it (%d bytes, was %d)", len(again), len(data))
			}
		})
	}
}

// writerFrom copies a parsed file into a writer.
func writerFrom(t testing.TB, f *File) *Writer {
	t.Helper()
	w := NewWriter()
	w.SetVersion(f.Version)
	for _, kv := range f.KVs {
		w.Set(kv.Key, kv.Value)
	}
	for i, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Shape, f.TensorData(i)); err != nil {
			t.Fatalf("AddTensor of a parsed tensor: %v", err)
		}
	}
	return w
}

func TestTensorInfoDims(t *testing.T) {
	tests := []struct {
		shape            []int64
		cols, rows, elem int64
	}{
		{[]int64{7}, 7, 1, 7},
		{[]int64{4, 3}, 4, 3, 12},
		{[]int64{2, 3, 4, 5}, 2, 60, 120},
	}
	for _, tt := range tests {
		ti := TensorInfo{Shape: tt.shape}
		if ti.Cols() != tt.cols || ti.Rows() != tt.rows || ti.Elements() != tt.elem {
			t.Errorf("%v: cols %d rows %d elements %d", tt.shape, ti.Cols(), ti.Rows(), ti.Elements())
		}
	}
}

func TestOpenModel(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.gguf")
	w := sampleWriter(t, 3, 0)
	w.Set("general.alignment", Uint32(64))
	w.Set("llama.context_length", Uint32(2048))
	w.Set("llama.rope.freq_base", Float32(10000))
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if m.Arch() != "llama" {
		t.Errorf("Arch = %q", m.Arch())
	}
	if n, ok := m.Uint("llama.context_length"); n != 2048 || !ok {
		t.Errorf("Uint = %d, %v", n, ok)
	}
	if n, ok := m.Int("i8"); n != -100 || !ok {
		t.Errorf("Int = %d, %v", n, ok)
	}
	if f, ok := m.Float("llama.rope.freq_base"); f != 10000 || !ok {
		t.Errorf("Float = %g, %v", f, ok)
	}
	if b, ok := m.Bool("bool.true"); !b || !ok {
		t.Errorf("Bool = %v, %v", b, ok)
	}
	if s, ok := m.String("general.name"); !ok || !strings.HasPrefix(s, "tiny") {
		t.Errorf("String = %q, %v", s, ok)
	}
	if ss, ok := m.Strings("tokenizer.ggml.tokens"); len(ss) != 5 || !ok {
		t.Errorf("Strings = %q, %v", ss, ok)
	}
	if _, ok := m.String("missing"); ok {
		t.Errorf("String of a missing key succeeded")
	}
	if _, ok := m.Uint("general.name"); ok {
		t.Errorf("Uint of a string succeeded")
	}
	if v, ok := m.Get("missing"); ok || v.IsValid() {
		t.Errorf("Get of a missing key = %v, %v", v, ok)
	}
	if len(m.KVs()) != len(sampleKVs())+3 {
		t.Errorf("%d KVs", len(m.KVs()))
	}
	var total int64
	for i, st := range sampleTensors {
		tn, ok := m.Tensor(st.name)
		if !ok {
			t.Fatalf("tensor %q missing", st.name)
		}
		if m.Tensors[i] != tn || tn.File != m.Files[0] {
			t.Errorf("tensor %q: order or file wrong", st.name)
		}
		if !bytes.Equal(tn.Data, tensorBytes(i, tn.Size)) || int64(cap(tn.Data)) != tn.Size {
			t.Errorf("tensor %q: data wrong (len %d cap %d)", st.name, len(tn.Data), cap(tn.Data))
		}
		total += tn.Size
	}
	if m.Size() != total {
		t.Errorf("Size = %d, want %d", m.Size(), total)
	}
	if _, ok := m.Tensor("nope"); ok {
		t.Errorf("found a tensor that is not there")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Metadata stays readable after Close; it does not point into the mapping.
	if ss, _ := m.Strings("tokenizer.ggml.tokens"); ss[3] != "▁the" {
		t.Errorf("token after Close = %q", ss[3])
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, want string }{
		{filepath.Join(dir, "absent.gguf"), "no such file"},
		{empty, "empty.gguf: truncated at byte 0 reading magic"},
		{dir, "not a regular file"},
	}
	for _, tt := range tests {
		_, err := Open(tt.path)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%s) = %v, want an error containing %q", tt.path, err, tt.want)
		}
	}
}

// writeSplit writes the sample tensors as a model split in n parts, in
// the way gguf-split does: metadata in the first part, split keys in all.
func writeSplit(t *testing.T, dir string, n int, edit func(part int, w *Writer)) string {
	t.Helper()
	prefix := filepath.Join(dir, "model")
	for p := range n {
		w := NewWriter()
		if p == 0 {
			for _, kv := range sampleKVs() {
				w.Set(kv.Key, kv.Value)
			}
		}
		w.Set(KeySplitNo, Uint16(uint16(p)))
		w.Set(KeySplitCount, Uint16(uint16(n)))
		w.Set(KeySplitTensorsCount, Int32(int32(len(sampleTensors))))
		for i, st := range sampleTensors {
			if i%n != p {
				continue
			}
			if err := w.AddTensor(st.name, st.typ, st.shape, tensorBytes(i, tensorSize(t, st.typ, st.shape))); err != nil {
				t.Fatal(err)
			}
		}
		if edit != nil {
			edit(p, w)
		}
		if err := w.WriteFile(SplitPath(prefix, p+1, n)); err != nil {
			t.Fatal(err)
		}
	}
	return prefix
}

func TestSplitModel(t *testing.T) {
	dir := t.TempDir()
	prefix := writeSplit(t, dir, 3, nil)
	for part := 1; part <= 3; part++ {
		m, err := Open(SplitPath(prefix, part, 3))
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Files) != 3 || m.Files[0].Path != SplitPath(prefix, 1, 3) {
			t.Fatalf("opened via part %d: %d files, first %s", part, len(m.Files), m.Files[0].Path)
		}
		if m.Arch() != "llama" {
			t.Errorf("metadata not from the first part: arch %q", m.Arch())
		}
		if len(m.Tensors) != len(sampleTensors) {
			t.Fatalf("%d tensors, want %d", len(m.Tensors), len(sampleTensors))
		}
		// File order: part 1's tensors, then part 2's, then part 3's.
		var order []string
		for p := range 3 {
			for i, st := range sampleTensors {
				if i%3 == p {
					order = append(order, st.name)
				}
			}
		}
		for i, tn := range m.Tensors {
			if tn.Name != order[i] {
				t.Errorf("tensor %d is %q, want %q", i, tn.Name, order[i])
			}
			idx := 0
			for j, st := range sampleTensors {
				if st.name == tn.Name {
					idx = j
				}
			}
			if !bytes.Equal(tn.Data, tensorBytes(idx, tn.Size)) {
				t.Errorf("%s: data wrong", tn.Name)
			}
			if want := SplitPath(prefix, idx%3+1, 3); tn.File.Path != want {
				t.Errorf("%s: in %s, want %s", tn.Name, tn.File.Path, want)
			}
		}
		m.Close()
	}
}

func TestSplitErrors(t *testing.T) {
	tests := []struct {
		name string
		n    int
		edit func(part int, w *Writer)
		rm   int // part to delete (1-based), 0 for none
		want string
	}{
		{name: "missing part", n: 3, rm: 2, want: "model-00002-of-00003.gguf: no such file"},
		{name: "wrong split.no", n: 3, edit: func(p int, w *Writer) {
			if p == 2 {
				w.Set(KeySplitNo, Uint16(1))
			}
		}, want: "split.no is 1, but the name says part 3 of 3"},
		{name: "wrong split.count", n: 2, edit: func(p int, w *Writer) {
			if p == 1 {
				w.Set(KeySplitCount, Uint16(3))
			}
		}, want: "split.count is 3, but the name says 2 parts"},
		{name: "wrong tensor count", n: 2, edit: func(p int, w *Writer) {
			w.Set(KeySplitTensorsCount, Int32(99))
		}, want: "split.tensors.count is 99, but the 2 parts hold 5 tensors"},
		{name: "negative split.no", n: 2, edit: func(p int, w *Writer) {
			w.Set(KeySplitNo, Int32(-1))
		}, want: "split.no is -1 (int32), want a non-negative integer"},
		{name: "duplicate tensor across parts", n: 2, edit: func(p int, w *Writer) {
			if p == 1 {
				if err := w.AddTensor("token_embd.weight", quant.F32, []int64{1}, make([]byte, 4)); err != nil {
					panic(err)
				}
			}
		}, want: `tensor "token_embd.weight" is also in`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			prefix := writeSplit(t, dir, tt.n, tt.edit)
			if tt.rm != 0 {
				os.Remove(SplitPath(prefix, tt.rm, tt.n))
			}
			m, err := Open(SplitPath(prefix, 1, tt.n))
			if err == nil {
				m.Close()
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}

	// A part renamed so its name no longer says it is split.
	dir := t.TempDir()
	prefix := writeSplit(t, dir, 2, nil)
	lone := filepath.Join(dir, "lone.gguf")
	if err := os.Rename(SplitPath(prefix, 1, 2), lone); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(lone); err == nil || !strings.Contains(err.Error(), "split.count is 2, but the name does not follow") {
		t.Errorf("renamed part: %v", err)
	}
	// One-part names are common for single downloads and must just open.
	one := writeSplit(t, t.TempDir(), 1, nil)
	m, err := Open(SplitPath(one, 1, 1))
	if err != nil {
		t.Fatalf("1-of-1: %v", err)
	}
	m.Close()
}

func TestWriterErrors(t *testing.T) {
	f32 := func(n int) []byte { return make([]byte, 4*n) }
	tests := []struct {
		name string
		do   func(w *Writer) error
		want string
	}{
		{"unknown type", func(w *Writer) error { return w.AddTensor("x", 99, []int64{1}, nil) }, "unknown tensor type 99"},
		{"no dims", func(w *Writer) error { return w.AddTensor("x", quant.F32, nil, nil) }, "0 dimensions"},
		{"five dims", func(w *Writer) error { return w.AddTensor("x", quant.F32, []int64{1, 1, 1, 1, 1}, f32(1)) }, "5 dimensions"},
		{"zero dim", func(w *Writer) error { return w.AddTensor("x", quant.F32, []int64{4, 0}, nil) }, "dimension 1 of shape [4 0] is 0"},
		{"overflow", func(w *Writer) error {
			return w.AddTensor("x", quant.F32, []int64{1 << 32, 1 << 32}, nil)
		}, "overflows the element count"},
		{"byte overflow", func(w *Writer) error {
			return w.AddTensor("x", quant.F64, []int64{1 << 31, 1 << 31}, nil)
		}, "overflows the byte size"},
		{"partial block", func(w *Writer) error { return w.AddTensor("x", quant.Q4_0, []int64{33}, nil) }, "not a whole number of 32-value blocks"},
		{"wrong length", func(w *Writer) error { return w.AddTensor("x", quant.F32, []int64{3}, f32(2)) }, "F32 [3] takes 12 bytes, got 8"},
		{"duplicate", func(w *Writer) error {
			w.AddTensor("x", quant.F32, []int64{1}, f32(1))
			return w.AddTensor("x", quant.F32, []int64{1}, f32(1))
		}, `"x": a tensor of that name was already added`},
		{"bad alignment", func(w *Writer) error { w.SetAlignment(48); return write(w) }, "general.alignment is 48 (uint32), want a power of two"},
		{"huge alignment", func(w *Writer) error { w.SetAlignment(1 << 40); return write(w) }, "general.alignment is 1099511627776 (int64)"},
		{"zero alignment", func(w *Writer) error { w.SetAlignment(0); return write(w) }, "general.alignment is 0"},
		{"version", func(w *Writer) error { w.SetVersion(1); return write(w) }, "cannot write GGUF version 1"},
		{"zero value", func(w *Writer) error { w.Set("k", Value{}); return write(w) }, `key "k": invalid (zero) Value`},
		{"mixed array", func(w *Writer) error {
			w.Set("k", Array(TypeArray, []Value{Int32Array(nil), Array(TypeInt8, []Value{Int16(1)})}))
			return write(w)
		}, `key "k": Array: element 1: Array: element 0 is int16, want int8`},
		{"bad element type", func(w *Writer) error { w.Set("k", Array(77, nil)); return write(w) }, "element type type(77)"},
		{"write file into missing dir", func(w *Writer) error {
			return w.WriteFile(filepath.Join(os.TempDir(), "no-such-dir-braid", "x.gguf"))
		}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do(NewWriter())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func write(w *Writer) error {
	_, err := w.WriteTo(&bytes.Buffer{})
	return err
}

func TestWriterSetReplaces(t *testing.T) {
	w := NewWriter()
	w.Set("a", Uint32(1))
	w.Set("b", Uint32(2))
	w.Set("a", String("x"))
	f, err := Parse("w.gguf", writeBytes(t, w))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.KVs) != 2 || f.KVs[0].Key != "a" || !f.KVs[0].Value.Equal(String("x")) || f.KVs[1].Key != "b" {
		t.Errorf("KVs = %v", f.KVs)
	}
}
