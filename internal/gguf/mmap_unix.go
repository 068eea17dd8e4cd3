//go:build unix

package gguf

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapFile maps a whole file read-only and shared, so that several
// processes (or ranks on one host) serving the same model share one copy in
// the page cache. An empty file maps to nil.
func mapFile(path string) ([]byte, error) {
	f, size, err := openRegular(path)
	if err != nil || size == 0 {
		return nil, err
	}
	defer f.Close()
	b, err := mmap(int(f.Fd()), int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return b, nil
}

// mmap and unmapFile work on raw addresses, not through syscall.Mmap's
// table of whole mappings: the copies of read mode are parts of a larger
// mapping (trimmed to a huge-page boundary).
func mmap(fd, n, prot, flags int) ([]byte, error) {
	p, err := unix.MmapPtr(fd, 0, nil, uintptr(n), prot, flags)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func unmapFile(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}

// openRegular opens path and returns its size, refusing what is not a
// regular file or cannot be addressed whole.
func openRegular(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s: not a regular file", path)
	}
	size := st.Size()
	if size > math.MaxInt-hugePage {
		f.Close()
		return nil, 0, fmt.Errorf("%s: %d bytes is too large to map in this address space", path, size)
	}
	if size == 0 {
		f.Close()
		return nil, 0, nil
	}
	return f, size, nil
}

// hugePage is the size transparent huge pages come in on the common
// architectures; the copy is aligned to it so that the kernel can back it
// with them, which saves TLB misses on every pass over the weights.
const hugePage = 2 << 20

// readChunk is how much one read takes: large enough that the system call
// costs nothing, small enough that the page cache it leaves behind (dropped
// after each chunk) never holds much of the file at once.
const readChunk = 64 << 20

// readAnon reads a whole file into private anonymous memory, then makes
// that memory read-only like the mapping it replaces. The page cache copy
// is dropped chunk by chunk as it is read, so the memory is not held twice
// at any point. An empty file reads as nil. progress, when set, gets the
// bytes of each chunk as it is read.
func readAnon(path string, progress func(int64)) ([]byte, error) {
	f, size, err := openRegular(path)
	if err != nil || size == 0 {
		return nil, err
	}
	defer f.Close()
	b, err := allocAligned(int(size))
	if err != nil {
		return nil, fmt.Errorf("%s: allocating %d bytes for the model: %w", path, size, err)
	}
	adviseHuge(b)
	for off := 0; off < len(b); {
		n := min(readChunk, len(b)-off)
		got, err := f.ReadAt(b[off:off+n], int64(off))
		if err != nil && !(errors.Is(err, io.EOF) && got == n) {
			unmapFile(b)
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%s: the file shrank while it was read (%d of %d bytes)", path, off+got, size)
			}
			return nil, fmt.Errorf("%s: reading: %w", path, err)
		}
		dropCache(f, int64(off), int64(n))
		off += n
		if progress != nil {
			progress(int64(n))
		}
	}
	if err := unix.Mprotect(b, unix.PROT_READ); err != nil {
		unmapFile(b)
		return nil, fmt.Errorf("%s: making the copy read-only: %w", path, err)
	}
	return b, nil
}

// allocAligned maps n bytes of anonymous memory starting at a huge-page
// boundary: it maps a huge page more than asked and unmaps the ends.
func allocAligned(n int) ([]byte, error) {
	raw, err := mmap(-1, n+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, err
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
	skip := int((hugePage - base%hugePage) % hugePage)
	// Past the end, from the first whole page after it.
	end := (skip + n + pageSize - 1) / pageSize * pageSize
	if err := unmapFile(raw[:skip]); err != nil {
		unmapFile(raw)
		return nil, err
	}
	if err := unmapFile(raw[end:]); err != nil {
		unmapFile(raw[skip:])
		return nil, err
	}
	return raw[skip : skip+n : skip+n], nil
}

var pageSize = os.Getpagesize()

// lockMapping locks b (the mapping of path) in memory, faulting it in.
func lockMapping(path string, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := unix.Mlock(b); err != nil {
		var lim unix.Rlimit
		if gerr := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); gerr != nil {
			lim = unix.Rlimit{Cur: 0, Max: 0}
		}
		return mlockError(path, int64(len(b)), err, lim.Cur, lim.Max)
	}
	return nil
}

func unlockMapping(b []byte) {
	if len(b) > 0 {
		unix.Munlock(b)
	}
}

// dropMapped tells the kernel this process does not need the mapped pages
// wholly inside b: they leave its resident set (the page cache keeps the
// file's copy) and come back from the page cache if b is read again, so
// it is safe on any view of a shared file mapping.
func dropMapped(b []byte) {
	const page = 4096
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	off := int((page - addr%page) % page)
	if off >= len(b) {
		return
	}
	b = b[off:]
	if n := len(b) &^ (page - 1); n > 0 {
		unix.Madvise(b[:n], unix.MADV_DONTNEED)
	}
}
