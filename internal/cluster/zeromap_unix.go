//go:build unix

package cluster

import "syscall"

// zeroMapping returns n bytes of zeros that cost no memory: a read-only
// anonymous mapping, whose pages all read as the kernel's zero page.
func zeroMapping(n int64) ([]byte, func(), error) {
	if n <= 0 {
		return nil, func() {}, nil
	}
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { syscall.Munmap(b) }, nil
}
