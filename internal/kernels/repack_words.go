package kernels

import "unsafe"

// The x8 layouts interleave eight rows four bytes at a time: word c of row
// r of a run lies at 32c+4r. gather4 and scatter4 move one row's n words
// out of such a run and into it; a prompt on x8 weights unpacks rows this
// way chunk by chunk for the plain tiles, and a load packs every matrix,
// so they are word moves without the bounds checks and calls that made
// the byte-slice versions (binary.LittleEndian, copy) run at 0.3-1.6 GB/s
// (BenchmarkX8Unpack). The words are moved as they are, so byte order
// does not matter; amd64 and arm64 take unaligned word loads and stores.

// gather4 writes row r's words 0..n-1 of the run src to dst[0:4n].
func gather4(dst, src []byte, r, n int) {
	if n <= 0 {
		return
	}
	_, _ = dst[4*n-1], src[32*(n-1)+4*r+3]
	d := unsafe.Pointer(&dst[0])
	s := unsafe.Add(unsafe.Pointer(&src[0]), 4*r)
	for c := 0; c < n; c++ {
		*(*uint32)(unsafe.Add(d, 4*c)) = *(*uint32)(unsafe.Add(s, 32*c))
	}
}

// scatter4 writes src[0:4n] as row r's words 0..n-1 of the run dst.
func scatter4(dst, src []byte, r, n int) {
	if n <= 0 {
		return
	}
	_, _ = src[4*n-1], dst[32*(n-1)+4*r+3]
	d := unsafe.Add(unsafe.Pointer(&dst[0]), 4*r)
	s := unsafe.Pointer(&src[0])
	for c := 0; c < n; c++ {
		*(*uint32)(unsafe.Add(d, 32*c)) = *(*uint32)(unsafe.Add(s, 4*c))
	}
}
