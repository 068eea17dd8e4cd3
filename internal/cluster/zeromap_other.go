//go:build !unix

package cluster

// zeroMapping returns n bytes of zeros (allocated: no anonymous mappings
// here).
func zeroMapping(n int64) ([]byte, func(), error) {
	return make([]byte, max(n, 0)), func() {}, nil
}
