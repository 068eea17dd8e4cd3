package kernels

import (
	"runtime"
	"testing"

	"golang.org/x/sys/cpu"

	"braid/internal/quant"
)

// TestIQSelected pins which kernel each grid and ternary format runs on
// this CPU, so that a registration mistake cannot fall back to the slow
// reference without a failing test.
func TestIQSelected(t *testing.T) {
	if ForcedGeneric() {
		t.Skip("BRAID_KERNELS=generic")
	}
	x, arm := &cpu.X86, &cpu.ARM64
	amd64 := runtime.GOARCH == "amd64"
	neon := runtime.GOARCH == "arm64" && arm.HasASIMD && arm.HasASIMDDP
	avx2 := amd64 && x.HasAVX2 && x.HasFMA && x.HasF16C && x.HasBMI1 && x.HasBMI2
	avx512 := avx2 && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI &&
		x.HasAVX512VBMI && x.HasAVX512BITALG
	for _, typ := range iqTypes {
		want := "generic"
		switch {
		case avx512 && typ != quant.IQ2_S && typ != quant.TQ1_0 && typ != quant.TQ2_0:
			want = "avx512vbmi"
		case avx2:
			want = "avx2"
		case neon:
			want = "neon-dotprod"
		}
		if got := implFor(typ); got == nil || got.name != want || got.act != quant.Q8_K {
			t.Errorf("%s: selected %+v, want %q taking Q8_K (features %v)", typ, got, want, Features())
		}
	}
}
