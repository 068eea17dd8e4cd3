//go:build unix

package kernels

import "testing"

// TestIQNoOverread runs every grid and ternary kernel on operands that end
// at a guard page: the assembly loads whole vectors, and none may reach
// past the last block of either operand.
func TestIQNoOverread(t *testing.T) {
	for _, typ := range iqTypes {
		for _, impl := range kqImpls(typ) {
			for _, n := range []int{256, 512} {
				r := kqRand(t.Name() + typ.String() + impl.name)
				w0 := iqRandWeights(r, typ, n/256, "exact")
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
