package kernels

import (
	"os"
	"strings"
	"testing"
)

// TestCPUVendor: the CPUID vendor string is the one the kernel reports in
// /proc/cpuinfo (where there is one), and the K-quant prefetch distance
// follows it.
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
	if (kqPrefetchDist == 0) != amd {
		t.Errorf("vendor %s: K-quant prefetch distance %d", v, kqPrefetchDist)
	}
}
