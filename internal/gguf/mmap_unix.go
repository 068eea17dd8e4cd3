//go:build unix

package gguf

import (
	"fmt"
	"math"
	"os"
	"syscall"
)

// mapFile maps a whole file read-only and shared, so that several
// processes (or ranks on one host) serving the same model share one copy in
// the page cache. An empty file maps to nil.
func mapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	size := st.Size()
	if size == 0 {
		return nil, nil
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("%s: %d bytes is too large to map in this address space", path, size)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return b, nil
}

func unmapFile(b []byte) error { return syscall.Munmap(b) }
