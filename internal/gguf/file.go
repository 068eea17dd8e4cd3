// Package gguf reads and writes GGUF model files: metadata, tensor
// directories and zero-copy views of tensor data in a read-only memory
// mapping, including models split over several files.
//
// Every count, length, offset and shape in a file is checked against the
// bytes that are really there before anything is allocated or sliced, so a
// truncated or hostile file gives an error naming the file and the value at
// fault, never a panic or an outsized allocation.
package gguf

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"unicode/utf8"

	"braid/internal/quant"
)

// Magic is the first four bytes of every GGUF file, read as a little-endian uint32.
const Magic = 0x46554747 // "GGUF"

// DefaultAlignment is the data alignment of files without general.alignment.
const DefaultAlignment = 32

// MaxDims is the most dimensions a tensor may have (ggml's GGML_MAX_DIMS).
const MaxDims = 4

// maxDepth bounds nesting of arrays inside arrays. No model uses more than
// one level; the limit only keeps hostile files from recursing deeply.
const maxDepth = 16

// KV is one metadata entry, kept in file order.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor as the file's directory records it.
type TensorInfo struct {
	Name string
	Type quant.Type
	// Shape is in ggml order: Shape[0] is the number of values in a row
	// (the fastest-varying dimension).
	Shape []int64
	// Offset is where the data starts, relative to the file's data section.
	Offset int64
	// Size is the number of bytes the data takes.
	Size int64
}

// Cols returns the number of values in a row (Shape[0]).
func (t *TensorInfo) Cols() int64 {
	if len(t.Shape) == 0 {
		return 1
	}
	return t.Shape[0]
}

// Rows returns the number of rows: the product of Shape[1:].
func (t *TensorInfo) Rows() int64 {
	r := int64(1)
	for _, d := range t.Shape[min(1, len(t.Shape)):] {
		r *= d
	}
	return r
}

// Elements returns the number of values in the tensor.
func (t *TensorInfo) Elements() int64 { return t.Cols() * t.Rows() }

// File is one parsed GGUF file. Metadata values are copies and outlive the
// file's bytes; tensor data is not copied (see TensorData).
type File struct {
	// Path is the name the file was opened or parsed under; errors use it.
	Path    string
	Version uint32
	// Alignment is the data alignment: general.alignment or DefaultAlignment.
	Alignment int64
	KVs       []KV
	Tensors   []TensorInfo
	// DataOffset is where the data section starts in the file.
	DataOffset int64

	data  []byte
	index map[string]int
}

// Get returns the value of a metadata key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.index[key]
	if !ok {
		return Value{}, false
	}
	return f.KVs[i].Value, true
}

// TensorData returns the bytes of tensor i of f without copying them: a
// view into the bytes f was parsed from (for Open, the read-only mapping,
// valid until the model is closed).
func (f *File) TensorData(i int) []byte {
	t := &f.Tensors[i]
	start := f.DataOffset + t.Offset
	return f.data[start : start+t.Size : start+t.Size]
}

// Parse parses a whole GGUF file held in memory. name is used in errors.
// The File keeps data for TensorData; metadata is copied out of it.
func Parse(name string, data []byte) (*File, error) {
	d := &decoder{name: name, data: data}
	f, err := d.file()
	if err != nil {
		return nil, err
	}
	return f, nil
}

// decoder reads little-endian values from data, checking every read
// against the bytes left and naming what it was reading when it fails.
type decoder struct {
	name string
	data []byte
	off  int
}

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("gguf: %s: %s", d.name, fmt.Sprintf(format, args...))
}

func (d *decoder) left() int { return len(d.data) - d.off }

// take returns the next n bytes, or an error saying the file is truncated
// while reading what.
func (d *decoder) take(n int, what func() string) ([]byte, error) {
	if n < 0 || n > d.left() {
		return nil, d.errorf("truncated at byte %d reading %s: need %d bytes, %d left", d.off, what(), n, d.left())
	}
	b := d.data[d.off : d.off+n]
	d.off += n
	return b, nil
}

func (d *decoder) u32(what func() string) (uint32, error) {
	b, err := d.take(4, what)
	if err != nil {
		return 0, err
	}
	return le.Uint32(b), nil
}

func (d *decoder) u64(what func() string) (uint64, error) {
	b, err := d.take(8, what)
	if err != nil {
		return 0, err
	}
	return le.Uint64(b), nil
}

// count reads a uint64 count of items of at least minSize bytes each and
// refuses counts the remaining bytes could not hold, so that nothing is
// ever allocated for items that are not there.
func (d *decoder) count(minSize int, what func() string) (int, error) {
	at := d.off
	n, err := d.u64(what)
	if err != nil {
		return 0, err
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(d.left()/minSize) {
		if minSize == 1 {
			return 0, d.errorf("%s is %d at byte %d, but only %d bytes are left: truncated or corrupt", what(), n, at, d.left())
		}
		return 0, d.errorf("%s is %d at byte %d, but only %d bytes are left (each needs at least %d): truncated or corrupt",
			what(), n, at, d.left(), minSize)
	}
	return int(n), nil
}

// str reads a length-prefixed string without copying it.
func (d *decoder) str(what func() string) ([]byte, error) {
	n, err := d.count(1, func() string { return what() + " length" })
	if err != nil {
		return nil, err
	}
	return d.take(n, what)
}

func (d *decoder) file() (*File, error) {
	f := &File{Path: d.name, Alignment: DefaultAlignment, data: d.data}
	magic, err := d.take(4, func() string { return "magic" })
	if err != nil {
		return nil, err
	}
	if string(magic) != "GGUF" {
		return nil, d.errorf("not a GGUF file: magic is %q, want \"GGUF\"", magic)
	}
	v, err := d.u32(func() string { return "version" })
	if err != nil {
		return nil, err
	}
	switch {
	case v == 2 || v == 3:
	case v == 1:
		return nil, d.errorf("GGUF version 1 is not supported (it predates 64-bit counts); convert the file to version 3")
	case v&0xFFFF == 0 && bits.ReverseBytes32(v) >= 1 && bits.ReverseBytes32(v) <= 3:
		return nil, d.errorf("version field is %#08x: this is a big-endian GGUF file (version %d), which is not supported", v, bits.ReverseBytes32(v))
	default:
		return nil, d.errorf("unsupported GGUF version %d (want 2 or 3)", v)
	}
	f.Version = v
	// Each tensor info takes at least 32 bytes (empty name, one dimension),
	// each KV at least 13 (empty key, type, one-byte value).
	nt, err := d.count(32, func() string { return "tensor count" })
	if err != nil {
		return nil, err
	}
	nkv, err := d.count(13, func() string { return "metadata count" })
	if err != nil {
		return nil, err
	}

	f.KVs = make([]KV, 0, nkv)
	f.index = make(map[string]int, nkv)
	for i := range nkv {
		at := d.off
		kb, err := d.str(func() string { return fmt.Sprintf("metadata key %d", i) })
		if err != nil {
			return nil, err
		}
		key := string(kb)
		if j, dup := f.index[key]; dup {
			return nil, d.errorf("metadata key %q at byte %d is a duplicate of entry %d", key, at, j)
		}
		what := func() string { return fmt.Sprintf("value of key %q", key) }
		t, err := d.u32(func() string { return what() + " type" })
		if err != nil {
			return nil, err
		}
		val, err := d.value(ValueType(t), 0, what)
		if err != nil {
			return nil, err
		}
		f.index[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{Key: key, Value: val})
	}

	if v, ok := f.Get("general.alignment"); ok {
		a, ok := alignmentOf(v)
		if !ok {
			return nil, d.errorf("general.alignment is %v (%v), want a power of two that fits in uint32", v, v.Type())
		}
		f.Alignment = a
	}

	f.Tensors = make([]TensorInfo, nt)
	names := make(map[string]int, nt)
	for i := range f.Tensors {
		if err := d.tensorInfo(&f.Tensors[i], i); err != nil {
			return nil, err
		}
		if j, dup := names[f.Tensors[i].Name]; dup {
			return nil, d.errorf("tensor %d: name %q is a duplicate of tensor %d", i, f.Tensors[i].Name, j)
		}
		names[f.Tensors[i].Name] = i
	}

	// The data section starts at the next multiple of the alignment. Files
	// without tensors may end before it (vocabulary-only files do).
	f.DataOffset = alignUp(int64(d.off), f.Alignment)
	return f, d.checkLayout(f)
}

// alignmentOf checks a general.alignment value. The spec says uint32, but
// any unsigned integer type is taken, as ggml's readers differ on this.
func alignmentOf(v Value) (int64, bool) {
	a, ok := v.Uint()
	if !ok || a == 0 || a&(a-1) != 0 || a > math.MaxUint32 {
		return 0, false
	}
	return int64(a), true
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// value decodes a value of type t; depth counts enclosing arrays.
func (d *decoder) value(t ValueType, depth int, what func() string) (Value, error) {
	switch {
	case t == TypeString:
		b, err := d.str(what)
		if err != nil {
			return Value{}, err
		}
		return String(string(b)), nil
	case t == TypeArray:
		return d.array(depth, what)
	case t.valid():
		b, err := d.take(t.size(), what)
		if err != nil {
			return Value{}, err
		}
		return scalar(t, getScalar(b, t)), nil
	}
	return Value{}, d.errorf("%s: unknown value type %d at byte %d", what(), uint32(t), d.off-4)
}

func (d *decoder) array(depth int, what func() string) (Value, error) {
	if depth >= maxDepth {
		return Value{}, d.errorf("%s: arrays nested more than %d deep", what(), maxDepth)
	}
	et, err := d.u32(func() string { return what() + " array element type" })
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Value{}, d.errorf("%s: unknown array element type %d at byte %d", what(), et, d.off-4)
	}
	n, err := d.count(elem.minSize(), func() string { return what() + " array length" })
	if err != nil {
		return Value{}, err
	}
	a := &array{elem: elem, n: n}
	switch elem {
	case TypeString:
		// Find the extent first, then copy all the bytes at once and slice
		// the strings out of that copy: one allocation instead of one per
		// token for a vocabulary.
		start := d.off
		ends := make([]int, n)
		for i := range n {
			// Fast path for the common case; the checked reader below
			// only runs to describe the failure.
			if d.left() >= 8 {
				if l := le.Uint64(d.data[d.off:]); l <= uint64(d.left()-8) {
					d.off += 8 + int(l)
					ends[i] = d.off - start
					continue
				}
			}
			if _, err := d.str(func() string { return fmt.Sprintf("%s element %d", what(), i) }); err != nil {
				return Value{}, err
			}
			return Value{}, d.errorf("%s element %d: internal error: string bounds disagree", what(), i)
		}
		blob := string(d.data[start:d.off])
		a.strs = make([]string, n)
		prev := 0
		for i, end := range ends {
			a.strs[i] = blob[prev+8 : end]
			prev = end
		}
	case TypeArray:
		// Grown as elements arrive rather than sized from n: a Value is
		// larger than the 12 bytes an empty nested array takes, and at
		// every level of a hostile nest that would multiply.
		for i := range n {
			ew := func() string { return fmt.Sprintf("%s element %d", what(), i) }
			x, err := d.array(depth+1, ew)
			if err != nil {
				return Value{}, err
			}
			a.vals = append(a.vals, x)
		}
	default:
		b, err := d.take(n*elem.size(), what)
		if err != nil {
			return Value{}, err
		}
		if n > 0 {
			a.raw = append([]byte(nil), b...)
		}
	}
	return Value{k: kind(TypeArray), a: a}, nil
}

func (d *decoder) tensorInfo(t *TensorInfo, i int) error {
	nb, err := d.str(func() string { return fmt.Sprintf("tensor %d name", i) })
	if err != nil {
		return err
	}
	t.Name = string(nb)
	label := fmt.Sprintf("tensor %q", t.Name)
	if !utf8.ValidString(t.Name) {
		label = fmt.Sprintf("tensor %d (name %q)", i, t.Name)
	}
	nd, err := d.u32(func() string { return label + " dimension count" })
	if err != nil {
		return err
	}
	if nd == 0 || nd > MaxDims {
		return d.errorf("%s: %d dimensions (want 1 to %d)", label, nd, MaxDims)
	}
	t.Shape = make([]int64, nd)
	elems := uint64(1)
	for j := range t.Shape {
		n, err := d.u64(func() string { return fmt.Sprintf("%s dimension %d", label, j) })
		if err != nil {
			return err
		}
		if n == 0 || n > math.MaxInt64 {
			return d.errorf("%s: dimension %d is %d (want 1 to 2^63-1)", label, j, int64(n))
		}
		hi, lo := bits.Mul64(elems, n)
		if hi != 0 || lo > math.MaxInt64 {
			return d.errorf("%s: shape %v overflows the element count", label, shapeOf(t.Shape[:j], n))
		}
		elems = lo
		t.Shape[j] = int64(n)
	}
	ty, err := d.u32(func() string { return label + " type" })
	if err != nil {
		return err
	}
	t.Type = quant.Type(ty)
	if !t.Type.Known() {
		return d.errorf("%s: unknown tensor type %d", label, ty)
	}
	off, err := d.u64(func() string { return label + " offset" })
	if err != nil {
		return err
	}
	if off > math.MaxInt64 {
		return d.errorf("%s: offset %d is out of range", label, off)
	}
	t.Offset = int64(off)
	rowBytes, err := t.Type.RowBytes(t.Shape[0])
	if err != nil {
		return d.errorf("%s: shape %v: rows of %d values are not whole %s blocks of %d", label, t.Shape, t.Shape[0], t.Type, t.Type.BlockSize())
	}
	hi, size := bits.Mul64(uint64(rowBytes), uint64(t.Rows()))
	if hi != 0 || size > math.MaxInt64 {
		return d.errorf("%s: shape %v of %s overflows the byte size", label, t.Shape, t.Type)
	}
	t.Size = int64(size)
	return nil
}

// shapeOf is the shape read so far plus the dimension that broke it, for errors.
func shapeOf(done []int64, next uint64) []uint64 {
	s := make([]uint64, 0, len(done)+1)
	for _, x := range done {
		s = append(s, uint64(x))
	}
	return append(s, next)
}

// checkLayout checks that every tensor is aligned, lies inside the file and
// overlaps no other.
func (d *decoder) checkLayout(f *File) error {
	if len(f.Tensors) == 0 {
		return nil
	}
	if f.DataOffset > int64(len(d.data)) {
		return d.errorf("truncated: data section starts at byte %d (header ends at %d, alignment %d), but the file has %d bytes",
			f.DataOffset, d.off, f.Alignment, len(d.data))
	}
	avail := int64(len(d.data)) - f.DataOffset
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset%f.Alignment != 0 {
			return d.errorf("tensor %q: offset %d is not a multiple of alignment %d", t.Name, t.Offset, f.Alignment)
		}
		if t.Offset > avail || t.Size > avail-t.Offset {
			return d.errorf("tensor %q: data at offset %d, %d bytes (%s %v), runs past the end of the file: the data section has %d bytes",
				t.Name, t.Offset, t.Size, t.Type, t.Shape, avail)
		}
	}
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return f.Tensors[order[a]].Offset < f.Tensors[order[b]].Offset })
	for k := 1; k < len(order); k++ {
		p, q := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if q.Offset < p.Offset+p.Size {
			return d.errorf("tensor %q (offset %d) overlaps tensor %q (offset %d, %d bytes)", q.Name, q.Offset, p.Name, p.Offset, p.Size)
		}
	}
	return nil
}
