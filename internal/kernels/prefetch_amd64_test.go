package kernels

import (
	"os"
	"strings"
	"testing"
)

// TestCPUVendor: the CPUID vendor string is the one the kernel reports in
// /proc/cpuinfo (where there is one), and the K-quant prefetch follows
// it.
func TestCPUVendor(t *testing.T) {
	v := cpuVendor()
	if len(v) != 12 || strings.TrimFunc(v, func(r rune) bool { return r >= 'A' && r <= 'z' }) != "" {
		t.Fatalf("vendor %q is not a 12-letter CPUID vendor string", v)
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, val, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "vendor_id" {
				if got := strings.TrimSpace(val); got != v {
					t.Errorf("CPUID says %q, /proc/cpuinfo %q", v, got)
				}
				break
			}
		}
	}
	amd := v == "AuthenticAMD" || v == "HygonGenuine"
	if (kqPrefetchOn == 0) != amd {
		t.Errorf("vendor %s: K-quant prefetch %d", v, kqPrefetchOn)
	}
}

// TestKQuantPrefetchPaths runs every K-quant kernel with the prefetches
// on (as on Intel) and off (as on AMD): both paths must run here, whatever
// this CPU's vendor, and give the same results.
func TestKQuantPrefetchPaths(t *testing.T) {
	saved := kqPrefetchOn
	defer func() { kqPrefetchOn = saved }()
	r := kqRand(t.Name())
	for _, typ := range kqTypes {
		for _, impl := range fast[typ] {
			const n = 2048
			w := kqRandWeights(r, typ, n/256, "rand")
			x := kqRandActs(r, n, "quantized")
			kqPrefetchOn = 1
			on := impl.dot(n, w, x)
			kqPrefetchOn = 0
			off := impl.dot(n, w, x)
			if on != off {
				t.Errorf("%s/%s: %g with prefetch, %g without", typ, impl.name, on, off)
			}
		}
	}
}
