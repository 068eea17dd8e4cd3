package kernels

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseHuge asks for transparent huge pages on the 2 MiB pages wholly
// inside b, a repacked copy about to be written: a model's worth of 4 KiB
// first-touch faults was most of the repacking's time (where THP is off
// the advice is refused and small pages serve).
func adviseHuge(b []byte) {
	const huge = 2 << 20
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	off := int((huge - addr%huge) % huge)
	if off >= len(b) {
		return
	}
	b = b[off:]
	if n := len(b) &^ (huge - 1); n > 0 {
		unix.Madvise(b[:n], unix.MADV_HUGEPAGE)
	}
}
