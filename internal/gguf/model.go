package gguf

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
)

// Tensor is a tensor of an open model with its data.
type Tensor struct {
	TensorInfo
	// File is the part of the model the tensor is stored in.
	File *File
	// Data is exactly Size bytes of read-only memory (the file's mapping,
	// or in read mode its copy): writing to it faults, and it is invalid
	// once the model is closed.
	Data []byte
}

// Model is a GGUF model opened from one file or from all the parts of a
// split model, presented as one.
type Model struct {
	// Files are the parts in order; metadata comes from Files[0].
	Files []*File
	// Tensors are all tensors, in directory order, part after part.
	Tensors []*Tensor

	byName map[string]*Tensor
	maps   [][]byte
	mode   LoadMode
	// progress is OpenWith's LoadOptions.Progress, while it reads.
	progress func(done, total int64)
}

// splitName matches the names llama.cpp's gguf-split gives the parts of a
// model: NAME-00001-of-00003.gguf.
var splitName = regexp.MustCompile(`^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// Split metadata keys, as gguf-split writes them. split.no counts from 0.
const (
	KeySplitNo           = "split.no"
	KeySplitCount        = "split.count"
	KeySplitTensorsCount = "split.tensors.count"
)

// SplitPath returns the file name of part no (1-based) of n of a split
// model whose parts are named prefix-0000no-of-0000n.gguf.
func SplitPath(prefix string, no, n int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, no, n)
}

// Open maps a model read-only (LoadMmap; OpenWith holds it otherwise). When path names any part of a split model
// (NAME-0000i-of-0000N.gguf) all N parts are opened, checked against their
// split.no and split.count metadata, and presented as one model.
func Open(path string) (*Model, error) {
	m := &Model{byName: map[string]*Tensor{}}
	if err := m.open(path); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func (m *Model) open(path string) error {
	first, err := m.openFile(path)
	if err != nil {
		return err
	}
	m.Files = []*File{first}
	count, err := splitInt(first, KeySplitCount)
	if err != nil {
		return err
	}
	sm := splitName.FindStringSubmatch(filepath.Base(path))
	if sm == nil || sm[3] == "00001" {
		// Not split by name: the file must not say it is a part either.
		if count > 1 {
			return fmt.Errorf("gguf: %s: %s is %d, but the name does not follow NAME-00001-of-%05d.gguf, so the other parts cannot be found",
				path, KeySplitCount, count, count)
		}
		if no, err := splitInt(first, KeySplitNo); err != nil {
			return err
		} else if no > 0 {
			return fmt.Errorf("gguf: %s: %s is %d: this is not the first part of a split model", path, KeySplitNo, no)
		}
		return m.index()
	}

	n, _ := strconv.Atoi(sm[3])
	no, _ := strconv.Atoi(sm[2])
	if n == 0 || no == 0 || no > n {
		return fmt.Errorf("gguf: %s: the name says part %d of %d", path, no, n)
	}
	prefix := filepath.Join(filepath.Dir(path), sm[1])
	parts := make([]*File, 0, n)
	for i := 1; i <= n; i++ {
		f := first
		if i != no {
			if f, err = m.openFile(SplitPath(prefix, i, n)); err != nil {
				return err
			}
		}
		if err := checkPart(f, i, n); err != nil {
			return err
		}
		parts = append(parts, f)
	}
	m.Files = parts
	if err := m.index(); err != nil {
		return err
	}
	if v, ok := m.Files[0].Get(KeySplitTensorsCount); ok {
		total, ok := v.Int()
		if !ok || total != int64(len(m.Tensors)) {
			return fmt.Errorf("gguf: %s: %s is %v, but the %d parts hold %d tensors",
				m.Files[0].Path, KeySplitTensorsCount, v, n, len(m.Tensors))
		}
	}
	return nil
}

// splitInt reads an integer split key; -1 when absent.
func splitInt(f *File, key string) (int64, error) {
	v, ok := f.Get(key)
	if !ok {
		return -1, nil
	}
	x, ok := v.Int()
	if !ok || x < 0 {
		return 0, fmt.Errorf("gguf: %s: %s is %v (%v), want a non-negative integer", f.Path, key, v, v.Type())
	}
	return x, nil
}

// checkPart checks that file f, found as part no of n by its name, says
// the same of itself, so that parts of different splits are never mixed.
func checkPart(f *File, no, n int) error {
	count, err := splitInt(f, KeySplitCount)
	if err != nil {
		return err
	}
	idx, err := splitInt(f, KeySplitNo)
	if err != nil {
		return err
	}
	if n == 1 && count < 0 && idx < 0 {
		return nil // a plain file that happens to be named -00001-of-00001
	}
	if count != int64(n) {
		return fmt.Errorf("gguf: %s: %s is %d, but the name says %d parts", f.Path, KeySplitCount, count, n)
	}
	if idx != int64(no-1) {
		return fmt.Errorf("gguf: %s: %s is %d, but the name says part %d of %d (split.no counts from 0)", f.Path, KeySplitNo, idx, no, n)
	}
	return nil
}

// openFile maps (or, in read mode, reads) and parses one file; m keeps
// the memory for Close.
func (m *Model) openFile(path string) (*File, error) {
	var data []byte
	var err error
	if m.mode == LoadRead {
		// The total is not known before every part is found: each
		// part's progress is reported against its own size.
		var done int64
		data, err = readAnon(path, func(n int64) {
			done += n
			if m.progress != nil {
				m.progress(done, fileSize(path))
			}
		})
	} else {
		data, err = mapFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if data != nil {
		m.maps = append(m.maps, data)
	}
	f, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// index builds the tensor list and name index over all parts.
func (m *Model) index() error {
	for _, f := range m.Files {
		for i := range f.Tensors {
			t := &Tensor{TensorInfo: f.Tensors[i], File: f, Data: f.TensorData(i)}
			if prev, dup := m.byName[t.Name]; dup {
				return fmt.Errorf("gguf: %s: tensor %q is also in %s", f.Path, t.Name, prev.File.Path)
			}
			m.byName[t.Name] = t
			m.Tensors = append(m.Tensors, t)
		}
	}
	return nil
}

// Close unmaps the files (or frees their copies). Tensor data views are invalid afterwards;
// metadata values stay valid. Closing twice is harmless.
func (m *Model) Close() error {
	var errs []error
	for _, b := range m.maps {
		if err := unmapFile(b); err != nil {
			errs = append(errs, err)
		}
	}
	m.maps = nil
	for _, t := range m.Tensors {
		t.Data = nil
	}
	return errors.Join(errs...)
}

// Get returns the value of a metadata key of the first part.
func (m *Model) Get(key string) (Value, bool) { return m.Files[0].Get(key) }

// KVs returns the metadata of the first part, in file order.
func (m *Model) KVs() []KV { return m.Files[0].KVs }

// String returns a string metadata value; false when absent or not a string.
func (m *Model) String(key string) (string, bool) {
	v, _ := m.Get(key)
	return v.Str()
}

// Uint returns an integer metadata value as uint64; false when absent,
// not an integer or negative.
func (m *Model) Uint(key string) (uint64, bool) {
	v, _ := m.Get(key)
	return v.Uint()
}

// Int returns an integer metadata value as int64; false when absent, not
// an integer or out of range.
func (m *Model) Int(key string) (int64, bool) {
	v, _ := m.Get(key)
	return v.Int()
}

// Float returns a float or integer metadata value as float64.
func (m *Model) Float(key string) (float64, bool) {
	v, _ := m.Get(key)
	return v.Float()
}

// Bool returns a bool metadata value.
func (m *Model) Bool(key string) (bool, bool) {
	v, _ := m.Get(key)
	return v.Bool()
}

// Strings returns a string array metadata value (shared; do not modify).
func (m *Model) Strings(key string) ([]string, bool) {
	v, _ := m.Get(key)
	return v.Strings()
}

// Arch returns general.architecture, the key prefix of the model's
// hyperparameters (as in "llama.context_length"), or "".
func (m *Model) Arch() string {
	s, _ := m.String("general.architecture")
	return s
}

// Tensor returns the tensor called name.
func (m *Model) Tensor(name string) (*Tensor, bool) {
	t, ok := m.byName[name]
	return t, ok
}

// Size returns the total bytes of tensor data over all parts.
func (m *Model) Size() int64 {
	var n int64
	for _, t := range m.Tensors {
		n += t.Size
	}
	return n
}
