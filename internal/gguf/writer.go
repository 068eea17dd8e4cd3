package gguf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"

	"braid/internal/quant"
)

// Writer builds a GGUF file: metadata in the order it is set, tensors in
// the order they are added, each aligned. Tensor data is held by reference
// until written, so views of a mapped model can be written out without
// copying them into memory first.
type Writer struct {
	version uint32
	kvs     []KV
	index   map[string]int
	tensors []wtensor
	names   map[string]bool
}

type wtensor struct {
	info TensorInfo
	data []byte
}

// NewWriter returns a Writer for a version 3 file with the default alignment.
func NewWriter() *Writer {
	return &Writer{version: 3, index: map[string]int{}, names: map[string]bool{}}
}

// SetVersion chooses the GGUF version written: 2 or 3. The two are the same
// on disk for little-endian files; version 2 exists for old readers.
func (w *Writer) SetVersion(v uint32) { w.version = v }

// SetAlignment sets the data alignment, recorded as general.alignment
// (uint32). It must be a power of two; WriteTo reports one that is not.
func (w *Writer) SetAlignment(n int64) {
	if n < 0 || n > math.MaxUint32 {
		w.Set("general.alignment", Int64(n)) // kept so WriteTo can name the bad value
		return
	}
	w.Set("general.alignment", Uint32(uint32(n)))
}

// Set sets a metadata key. A new key goes after those already set; an
// existing key keeps its place and takes the new value.
func (w *Writer) Set(key string, v Value) {
	if i, ok := w.index[key]; ok {
		w.kvs[i].Value = v
		return
	}
	w.index[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{Key: key, Value: v})
}

// AddTensor adds a tensor of type t and ggml-order shape. data must hold
// exactly the tensor's bytes; it is not copied, so it must not change until
// the file is written.
func (w *Writer) AddTensor(name string, t quant.Type, shape []int64, data []byte) error {
	if w.names[name] {
		return fmt.Errorf("gguf: AddTensor %q: a tensor of that name was already added", name)
	}
	if !t.Known() {
		return fmt.Errorf("gguf: AddTensor %q: unknown tensor type %d", name, uint32(t))
	}
	if len(shape) == 0 || len(shape) > MaxDims {
		return fmt.Errorf("gguf: AddTensor %q: %d dimensions (want 1 to %d)", name, len(shape), MaxDims)
	}
	elems := uint64(1)
	for i, n := range shape {
		if n <= 0 {
			return fmt.Errorf("gguf: AddTensor %q: dimension %d of shape %v is %d (want at least 1)", name, i, shape, n)
		}
		hi, lo := bits.Mul64(elems, uint64(n))
		if hi != 0 || lo > math.MaxInt64 {
			return fmt.Errorf("gguf: AddTensor %q: shape %v overflows the element count", name, shape)
		}
		elems = lo
	}
	info := TensorInfo{Name: name, Type: t, Shape: append([]int64(nil), shape...)}
	rowBytes, err := t.RowBytes(shape[0])
	if err != nil {
		return fmt.Errorf("gguf: AddTensor %q: shape %v: %v", name, shape, err)
	}
	hi, size := bits.Mul64(uint64(rowBytes), uint64(info.Rows()))
	if hi != 0 || size > math.MaxInt64 {
		return fmt.Errorf("gguf: AddTensor %q: shape %v of %s overflows the byte size", name, shape, t)
	}
	if uint64(len(data)) != size {
		return fmt.Errorf("gguf: AddTensor %q: %s %v takes %d bytes, got %d", name, t, shape, size, len(data))
	}
	info.Size = int64(size)
	w.names[name] = true
	w.tensors = append(w.tensors, wtensor{info: info, data: data})
	return nil
}

// alignment returns the alignment the file will use, checked as a reader
// would check it.
func (w *Writer) alignment() (int64, error) {
	i, ok := w.index["general.alignment"]
	if !ok {
		return DefaultAlignment, nil
	}
	v := w.kvs[i].Value
	a, ok := alignmentOf(v)
	if !ok {
		return 0, fmt.Errorf("gguf: general.alignment is %v (%v), want a power of two that fits in uint32", v, v.Type())
	}
	return a, nil
}

// layout assigns each tensor its offset in the data section and returns
// the alignment.
func (w *Writer) layout() (int64, error) {
	if w.version != 2 && w.version != 3 {
		return 0, fmt.Errorf("gguf: cannot write GGUF version %d (want 2 or 3)", w.version)
	}
	align, err := w.alignment()
	if err != nil {
		return 0, err
	}
	for _, kv := range w.kvs {
		if err := checkValue(kv.Value, 0); err != nil {
			return 0, fmt.Errorf("gguf: key %q: %v", kv.Key, err)
		}
	}
	off := int64(0)
	for i := range w.tensors {
		t := &w.tensors[i].info
		t.Offset = off
		off = alignUp(off+t.Size, align)
	}
	return align, nil
}

// checkValue refuses values a reader would refuse (invalid, nested too deep).
func checkValue(v Value, depth int) error {
	switch v.Type() {
	case TypeInvalid:
		if v.a != nil && v.a.err != nil {
			return v.a.err
		}
		return errors.New("invalid (zero) Value")
	case TypeArray:
		if depth >= maxDepth {
			return fmt.Errorf("arrays nested more than %d deep", maxDepth)
		}
		for _, x := range v.a.vals {
			if err := checkValue(x, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// countWriter counts what passes through and keeps the first error, so
// the encoder can write without checking each call.
type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

func (c *countWriter) u32(x uint32) {
	var b [4]byte
	le.PutUint32(b[:], x)
	c.write(b[:])
}

func (c *countWriter) u64(x uint64) {
	var b [8]byte
	le.PutUint64(b[:], x)
	c.write(b[:])
}

func (c *countWriter) str(s string) {
	c.u64(uint64(len(s)))
	if c.err == nil {
		n, err := c.w.WriteString(s)
		c.n += int64(n)
		c.err = err
	}
}

var zeros [4096]byte

func (c *countWriter) pad(to int64) {
	for c.n < to && c.err == nil {
		c.write(zeros[:min(int64(len(zeros)), to-c.n)])
	}
}

func (c *countWriter) value(v Value) {
	switch v.Type() {
	case TypeString:
		c.str(v.s)
	case TypeArray:
		a := v.a
		c.u32(uint32(a.elem))
		c.u64(uint64(a.n))
		switch a.elem {
		case TypeString:
			for _, s := range a.strs {
				c.str(s)
			}
		case TypeArray:
			for _, x := range a.vals {
				c.value(x)
			}
		default:
			c.write(a.raw)
		}
	default:
		var b [8]byte
		putScalar(b[:], v.Type(), v.n)
		c.write(b[:v.Type().size()])
	}
}

// WriteTo writes the file to out and returns the bytes written.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	align, err := w.layout()
	if err != nil {
		return 0, err
	}
	c := &countWriter{w: bufio.NewWriterSize(out, 1<<20)}
	c.write([]byte("GGUF"))
	c.u32(w.version)
	c.u64(uint64(len(w.tensors)))
	c.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		c.str(kv.Key)
		c.u32(uint32(kv.Value.Type()))
		c.value(kv.Value)
	}
	for _, t := range w.tensors {
		c.str(t.info.Name)
		c.u32(uint32(len(t.info.Shape)))
		for _, d := range t.info.Shape {
			c.u64(uint64(d))
		}
		c.u32(uint32(t.info.Type))
		c.u64(uint64(t.info.Offset))
	}
	if len(w.tensors) > 0 {
		c.pad(alignUp(c.n, align))
		base := c.n
		for _, t := range w.tensors {
			c.pad(base + t.info.Offset)
			c.write(t.data)
		}
		// Pad the last tensor too, so that files concatenate and every
		// tensor's end is aligned, as ggml's writer does.
		c.pad(alignUp(c.n, align))
	}
	if c.err == nil {
		c.err = c.w.Flush()
	}
	return c.n, c.err
}

// WriteFile writes the file to path atomically: to a temporary file in the
// same directory, synced, then renamed, so that a reader never sees half a
// model under the final name.
func (w *Writer) WriteFile(path string) (err error) {
	if _, err := w.layout(); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = w.WriteTo(tmp); err != nil {
		return fmt.Errorf("gguf: writing %s: %w", path, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("gguf: writing %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf: writing %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}
