package gguf

import (
	"os"

	"golang.org/x/sys/unix"
)

// adviseHuge asks for transparent huge pages; where THP is off or only
// "never", the advice is refused and ordinary pages serve.
func adviseHuge(b []byte) { unix.Madvise(b, unix.MADV_HUGEPAGE) }

// dropCache tells the kernel that the file's pages in [off, off+n) are not
// needed again: the copy holds them now. Pages another process maps stay.
func dropCache(f *os.File, off, n int64) { unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED) }
