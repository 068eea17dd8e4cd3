package quant_test

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"testing"

	"braid/internal/gguf"
	"braid/internal/quant"
	"braid/internal/sharedtest"
)

// refDir and refIQDir hold llama.cpp's reference quantizations (see their
// README.md files); refIQDir has the low-bit formats.
const (
	refDir   = "../../../shared/testdata/quants/"
	refIQDir = "../../../shared/testdata/quants-iq/"
)

// refFile is one of the reference GGUF files, opened for a test.
type refFile struct{ m *gguf.Model }

func loadRef(t *testing.T, name string) refFile {
	t.Helper()
	return loadRefAt(t, refDir, name)
}

func loadRefAt(t *testing.T, dir, name string) refFile {
	t.Helper()
	m, err := gguf.Open(dir + name)
	if errors.Is(err, fs.ErrNotExist) {
		sharedtest.Missing(t, "reference data %s not available (it lives in the shared checkout, not the repo): %v", name, err)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() { m.Close() })
	return refFile{m}
}

// tensor returns the named tensor, or ok=false if the file lacks it.
func (f refFile) tensor(name string) (typ quant.Type, data []byte, ok bool) {
	tt, ok := f.m.Tensor(name)
	if !ok {
		return 0, nil, false
	}
	return tt.Type, tt.Data, true
}

func (f refFile) data(t *testing.T, name string) []byte {
	t.Helper()
	_, d, ok := f.tensor(name)
	if !ok {
		t.Fatalf("reference tensor %s missing", name)
	}
	return d
}

func (f refFile) f32(t *testing.T, name string) []float32 {
	t.Helper()
	typ, d, ok := f.tensor(name)
	if !ok || typ != quant.F32 {
		t.Fatalf("reference tensor %s missing or not F32", name)
	}
	out := make([]float32, len(d)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
	}
	return out
}
