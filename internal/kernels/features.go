package kernels

import "golang.org/x/sys/cpu"

// Features lists the CPU features relevant to kernel selection that this
// machine has, in the names of /proc/cpuinfo, for logs and `braid doctor`.
// golang.org/x/sys/cpu fills only the current architecture's fields, so one
// list covers both.
func Features() []string {
	var out []string
	add := func(ok bool, name string) {
		if ok {
			out = append(out, name)
		}
	}
	x := &cpu.X86
	add(x.HasSSE41, "sse4.1")
	add(x.HasAVX, "avx")
	add(x.HasAVX2, "avx2")
	add(x.HasFMA, "fma")
	add(x.HasF16C, "f16c")
	add(x.HasAVX512F, "avx512f")
	add(x.HasAVX512BW, "avx512bw")
	add(x.HasAVX512VL, "avx512vl")
	add(x.HasAVX512VNNI, "avx512vnni")
	add(x.HasAVX512BF16, "avx512bf16")
	add(x.HasAVXVNNI, "avxvnni")
	add(x.HasAMXInt8, "amx-int8")
	a := &cpu.ARM64
	add(a.HasASIMD, "neon")
	add(a.HasASIMDHP, "asimdhp")
	add(a.HasASIMDDP, "asimddp")
	add(a.HasI8MM, "i8mm")
	add(a.HasSVE, "sve")
	return out
}
