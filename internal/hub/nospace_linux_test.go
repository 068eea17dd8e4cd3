package hub

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"braid/internal/hub/hubtest"
)

// A disk that fills up mid-download: the partial file is removed and the
// error says how much the file needs. It mounts a 256 KiB tmpfs (skipped
// where that is not allowed) and hides the free-space check that would
// otherwise refuse before the download.
func TestPullDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v", err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	h := hubtest.New(testRepo())
	defer h.Close()
	defer func(f func(string) (int64, bool)) { freeSpace = f }(freeSpace)
	freeSpace = func(string) (int64, bool) { return 0, false }
	cache := Cache{Dir: dir}
	_, err := testClient(h).Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q4_K_M"))
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), "it needs 1.00 MiB") {
		t.Fatalf("disk full: %v", err)
	}
	for _, p := range tree(t, dir)[1:] {
		if !strings.HasPrefix(p, ".locks") {
			t.Errorf("left behind: %s", p)
		}
	}
	if _, err := os.Stat(cache.partPath("org/Model-GGUF", h.SHA256("org/Model-GGUF", "Model-Q4_K_M.gguf"))); err == nil {
		t.Error("the partial file is still there")
	}
}
