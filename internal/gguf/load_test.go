package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// checkSample checks that every tensor of m holds the sample data of the
// tensor of its name.
func checkSample(t *testing.T, m *Model) {
	t.Helper()
	if len(m.Tensors) != len(sampleTensors) {
		t.Fatalf("%d tensors, want %d", len(m.Tensors), len(sampleTensors))
	}
	for i, st := range sampleTensors {
		tn, ok := m.Tensor(st.name)
		if !ok {
			t.Fatalf("tensor %s missing", st.name)
		}
		if !bytes.Equal(tn.Data, tensorBytes(i, tn.Size)) {
			t.Errorf("%s: data differs from what was written", st.name)
		}
	}
}

// mapsOf returns the lines of /proc/self/maps that name path.
func mapsOf(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps here: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasSuffix(l, " "+path) {
			lines = append(lines, l)
		}
	}
	return lines
}

// vmLocked is the process's locked memory (VmLck of /proc/self/status).
func vmLocked(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmLck:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				t.Fatalf("VmLck line %q: %v", l, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmLck line in /proc/self/status")
	return 0
}

// TestLoadModes opens one model (single and split) in each mode: the same
// bytes, the mode reported, and in read mode no mapping of the file left.
func TestLoadModes(t *testing.T) {
	dir := t.TempDir()
	single := filepath.Join(dir, "model.gguf")
	if err := sampleWriter(t, 3, 0).WriteFile(single); err != nil {
		t.Fatal(err)
	}
	prefix := writeSplit(t, dir, 2, nil)
	for _, path := range []string{single, SplitPath(prefix, 2, 2)} {
		for _, mode := range []LoadMode{LoadMmap, LoadRead, LoadMlock} {
			t.Run(filepath.Base(path)+"/"+mode.String(), func(t *testing.T) {
				m, err := OpenWith(path, LoadOptions{Mode: mode})
				if err != nil {
					if mode == LoadMlock && (errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EPERM)) {
						t.Skipf("mlock refused here (RLIMIT_MEMLOCK): %v", err)
					}
					t.Fatal(err)
				}
				defer m.Close()
				if m.Mode() != mode {
					t.Errorf("Mode() = %s, want %s", m.Mode(), mode)
				}
				checkSample(t, m)
				if runtime.GOOS != "linux" {
					return
				}
				if locked := vmLocked(t); mode == LoadMlock && locked < m.Size() {
					t.Errorf("mlock mode: %d bytes locked (VmLck), want at least the %d bytes of tensors", locked, m.Size())
				}
				for _, f := range m.Files {
					mapped := mapsOf(t, f.Path)
					if mode == LoadRead && len(mapped) > 0 {
						t.Errorf("read mode left %s mapped: %q", f.Path, mapped)
					}
					if mode != LoadRead && len(mapped) == 0 {
						t.Errorf("%s mode: %s is not in /proc/self/maps (the check would not see a mapping)", mode, f.Path)
					}
				}
			})
		}
	}
}

// TestSetModeRead converts a mapped model: the Tensor values callers hold
// keep their identity and now view the copy, the file is no longer mapped,
// and the metadata is unchanged.
func TestSetModeRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := sampleWriter(t, 3, 32).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	held, _ := m.Tensor("blk.0.ffn_up.weight")
	before := &held.Data[0]
	if runtime.GOOS == "linux" && len(mapsOf(t, path)) == 0 {
		t.Fatal("the mapped model is not in /proc/self/maps")
	}
	var last, total int64
	progress := func(done, all int64) {
		if done <= last || done > all {
			t.Errorf("progress went from %d to %d of %d", last, done, all)
		}
		last, total = done, all
	}
	if err := m.SetMode(LoadOptions{Mode: LoadRead, Progress: progress}); err != nil {
		t.Fatal(err)
	}
	if last != m.Bytes() || total != m.Bytes() {
		t.Errorf("progress ended at %d of %d, want %d of %d", last, total, m.Bytes(), m.Bytes())
	}
	if m.Mode() != LoadRead {
		t.Errorf("Mode() = %s after SetMode(read)", m.Mode())
	}
	now, _ := m.Tensor("blk.0.ffn_up.weight")
	if now != held || &held.Data[0] == before {
		t.Errorf("the held tensor was replaced (%p -> %p) or still views the mapping", held, now)
	}
	checkSample(t, m)
	if runtime.GOOS == "linux" {
		if l := mapsOf(t, path); len(l) > 0 {
			t.Errorf("the file is still mapped after SetMode(read): %q", l)
		}
	}
	if m.Arch() != "llama" {
		t.Errorf("metadata lost: arch %q", m.Arch())
	}
	if err := m.SetMode(LoadOptions{Mode: LoadMlock}); err == nil || !strings.Contains(err.Error(), "only a mapped model changes mode") {
		t.Errorf("SetMode(mlock) on a read model: %v, want a refusal", err)
	}
	if err := m.SetMode(LoadOptions{Mode: LoadRead}); err != nil {
		t.Errorf("SetMode to the current mode: %v", err)
	}
}

// TestSetModeChangedFile refuses to copy a file that changed under the
// mapping, and leaves the model usable in mmap mode.
func TestSetModeChangedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := sampleWriter(t, 3, 0).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Replace the file (a new inode): the mapping keeps the old bytes.
	other := sampleWriter(t, 3, 0)
	other.Set("general.name", String("a different model of another length"))
	if err := other.WriteFile(path + ".new"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if err := m.SetMode(LoadOptions{Mode: LoadRead}); err == nil || !strings.Contains(err.Error(), "changed on disk") {
		t.Fatalf("SetMode(read) of a replaced file: %v, want a refusal naming the change", err)
	}
	if m.Mode() != LoadMmap {
		t.Errorf("mode %s after a failed SetMode", m.Mode())
	}
	checkSample(t, m)
}

func TestParseLoadMode(t *testing.T) {
	for _, s := range []string{"mmap", "read", "mlock"} {
		m, err := ParseLoadMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseLoadMode(%q) = %v, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "auto", "MMAP", "lock"} {
		if _, err := ParseLoadMode(s); err == nil || !strings.Contains(err.Error(), `"`+s+`"`) {
			t.Errorf("ParseLoadMode(%q): %v, want an error naming the value", s, err)
		}
	}
}

// TestMlockError checks the advice for each cause: a limit below the
// model names the limit and how to raise it; a limit that allows it says
// memory is short instead.
func TestMlockError(t *testing.T) {
	low := mlockError("/m.gguf", 3<<30, syscall.ENOMEM, 8<<20, 8<<20).Error()
	for _, want := range []string{"/m.gguf", "3072 MiB", "RLIMIT_MEMLOCK is 8192 KiB (hard limit 8192 KiB)", "ulimit -l unlimited", "LimitMEMLOCK=infinity", "--load-mode read"} {
		if !strings.Contains(low, want) {
			t.Errorf("low-limit error lacks %q:\n%s", want, low)
		}
	}
	short := mlockError("/m.gguf", 3<<30, syscall.EAGAIN, rlimInfinity, rlimInfinity).Error()
	if !strings.Contains(short, "RLIMIT_MEMLOCK (unlimited) allows it") || strings.Contains(short, "ulimit -l") {
		t.Errorf("unlimited-limit error should blame memory, not the limit:\n%s", short)
	}
}
