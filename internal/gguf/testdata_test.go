package gguf

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"braid/internal/quant"
	"braid/internal/sharedtest"
)

// sharedTestdata is the shared model and vocabulary collection, outside the
// repository; tests that need it skip when it is absent.
const sharedTestdata = "../../../shared/testdata"

func sharedFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"models", "vocab", "quants"} {
		root := filepath.Join(sharedTestdata, dir)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".gguf") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if len(files) == 0 {
		sharedtest.Missing(t, "no GGUF files under %s (the shared test data is not checked out here)", sharedTestdata)
	}
	return files
}

// TestSharedFilesOpen opens every shared test file: real files from
// llama.cpp's converters are the check that the reader is not stricter
// than the format.
func TestSharedFilesOpen(t *testing.T) {
	for _, path := range sharedFiles(t) {
		t.Run(strings.TrimPrefix(path, sharedTestdata+"/"), func(t *testing.T) {
			m, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if m.Size() > st.Size() {
				t.Errorf("tensor bytes %d exceed file size %d", m.Size(), st.Size())
			}
			for _, tn := range m.Tensors {
				if int64(len(tn.Data)) != tn.Size {
					t.Errorf("%s: %d data bytes, want %d", tn.Name, len(tn.Data), tn.Size)
				}
			}
			if strings.Contains(path, "/models/") && m.Arch() == "" {
				t.Errorf("no general.architecture")
			}
			for _, kv := range m.KVs() {
				if s := kv.Value.String(); len(s) > 1000 {
					t.Errorf("%s: String() is %d bytes long; long values should be summarised", kv.Key, len(s))
				}
			}
			// braid's writer must reproduce llama.cpp's files byte for byte:
			// same layout rules, same encoding.
			var buf bytes.Buffer
			if _, err := writerFrom(t, m.Files[0]).WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			orig := m.Files[0].data
			if !bytes.Equal(buf.Bytes(), orig) {
				n := 0
				for n < min(buf.Len(), len(orig)) && buf.Bytes()[n] == orig[n] {
					n++
				}
				t.Errorf("rewritten file differs from the original at byte %d (lengths %d and %d, data section at %d)",
					n, buf.Len(), len(orig), m.Files[0].DataOffset)
			}
		})
	}
}

// TestQuantsFileSizes checks the type table's block sizes against the
// quantization reference file: every tensor but the last is followed by
// the next one's offset (after alignment), which bounds its real size.
func TestQuantsFileSizes(t *testing.T) {
	path := filepath.Join(sharedTestdata, "quants/quants.gguf")
	if _, err := os.Stat(path); err != nil {
		sharedtest.Missing(t, "%s absent: %v", path, err)
	}
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f := m.Files[0]
	for i, ti := range f.Tensors {
		end := int64(len(f.data)) - f.DataOffset
		for _, o := range f.Tensors {
			if o.Offset > ti.Offset && o.Offset < end {
				end = o.Offset
			}
		}
		gap := end - ti.Offset
		if gap < ti.Size || gap >= alignUp(ti.Size, f.Alignment)+f.Alignment {
			t.Errorf("tensor %d %q %s %v: size %d by the type table, but %d bytes until the next tensor",
				i, ti.Name, ti.Type, ti.Shape, ti.Size, gap)
		}
		if ti.Type == quant.NVFP4 {
			t.Logf("nvfp4: %v, %d bytes by the table, gap %d", ti.Shape, ti.Size, gap)
		}
	}
}
