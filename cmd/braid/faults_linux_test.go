package main

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"braid/internal/sysinfo"
)

// TestMajorFaults: reading a mapped page whose page cache was dropped is
// a major fault, and majorFaults counts it.
func TestMajorFaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pages")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fsync(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Skipf("fadvise: %v", err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, 1<<20, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	// The kernel may keep pages that fadvise asked it to drop (some file
	// systems ignore the advice); then reading them cannot fault, which
	// says nothing about majorFaults.
	vec := make([]byte, len(b)/4096)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	for i, v := range vec {
		if v&1 != 0 {
			t.Skipf("page %d of %d stayed cached after FADV_DONTNEED on this file system: no page can be read from disk", i, len(vec))
		}
	}
	// The kernel's own count (getrusage) is the oracle: on a loaded machine
	// it has been seen to count no major fault for these reads (the pages
	// came back some other way), which says nothing about majorFaults.
	var ru0, ru1 unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru0); err != nil {
		t.Fatal(err)
	}
	before := majorFaults()
	var sum byte
	for i := 0; i < len(b); i += 4096 {
		sum += b[i]
	}
	after := majorFaults()
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru1); err != nil {
		t.Fatal(err)
	}
	if ru1.Majflt == ru0.Majflt {
		if sysinfo.InMemoryFS(path) {
			t.Skip("the temporary directory is in memory: no page is read from disk")
		}
		t.Skipf("the kernel counted no major fault for reading %d dropped pages (getrusage %d -> %d)", len(vec), ru0.Majflt, ru1.Majflt)
	}
	if after <= before {
		t.Errorf("reading %d dropped pages: getrusage counted %d major faults, majorFaults %d -> %d (sum %d)", len(vec), ru1.Majflt-ru0.Majflt, before, after, sum)
	}
}
