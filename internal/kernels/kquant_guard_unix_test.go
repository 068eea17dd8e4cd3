//go:build unix

package kernels

import (
	"os"
	"syscall"
	"testing"
)

// kqGuarded returns a copy of b that ends right before an inaccessible
// page, so that any read past its end faults.
func kqGuarded(t *testing.T, b []byte) []byte {
	t.Helper()
	ps := os.Getpagesize()
	n := (len(b)+ps-1)/ps*ps + ps
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[n-ps:], syscall.PROT_NONE); err != nil {
		t.Skipf("mprotect: %v", err)
	}
	out := mem[n-ps-len(b) : n-ps]
	copy(out, b)
	return out
}

// TestKQuantNoOverread runs every kernel on operands that end at a guard
// page: the assembly loads whole vectors, and none may reach past the last
// block of either operand.
func TestKQuantNoOverread(t *testing.T) {
	for _, typ := range kqTypes {
		for _, impl := range kqImpls(typ) {
			for _, n := range []int{256, 512} {
				r := kqRand(t.Name() + typ.String() + impl.name)
				w0 := kqRandWeights(r, typ, n/256, "exact")
				x0 := kqRandActs(r, n, "exact")
				want := generic[typ].dot(n, w0, x0)
				w, x := kqGuarded(t, w0), kqGuarded(t, x0)
				if got := impl.dot(n, w, x); got != want {
					t.Errorf("%s/%s n=%d: got %.9g, want %.9g", typ, impl.name, n, got, want)
				}
			}
		}
	}
}
