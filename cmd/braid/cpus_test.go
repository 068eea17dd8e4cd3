package main

import (
	"slices"
	"strings"
	"testing"

	"braid/internal/sysinfo"
)

// gb10Cores is a GB10 as sysinfo.ReadCores sees it: ten big cores at
// 5-9,15-19, ten little ones at 0-4,10-14.
func gb10Cores() sysinfo.Cores {
	return sysinfo.Cores{By: "cpu_capacity", Allowed: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19},
		Classes: []sysinfo.CoreClass{
			{CPUs: []int{5, 6, 7, 8, 9, 15, 16, 17, 18, 19}, Cores: 10, Capacity: 1024},
			{CPUs: []int{0, 1, 2, 3, 4, 10, 11, 12, 13, 14}, Cores: 10, Capacity: 650},
		}}
}

func TestPlaceThreads(t *testing.T) {
	uniform := sysinfo.Cores{Allowed: []int{0, 1, 2, 3}, Classes: []sysinfo.CoreClass{{CPUs: []int{0, 1, 2, 3}, Cores: 4}}}
	tests := []struct {
		name    string
		cores   sysinfo.Cores
		list    string
		threads int
		tGiven  bool
		// want: the CPUs pinned ("" none), the threads after, a phrase
		// of the line, or of the error
		pinned  string
		after   int
		says    string
		failure string
	}{
		{"GB10 default", gb10Cores(), "", 10, false, "5-9,15-19", 10, "the big cores", ""},
		{"GB10 -t 4", gb10Cores(), "", 4, true, "5-9,15-19", 4, "4 threads", ""},
		{"GB10 -t 20", gb10Cores(), "", 20, true, "", 20, "the little ones (0-4,10-14) too", ""},
		{"GB10 --cpus", gb10Cores(), "0-4", 10, false, "0-4", 5, "cpus 0-4 (--cpus), 5 threads", ""},
		{"GB10 --cpus with -t", gb10Cores(), "5,6", 8, true, "5-6", 8, "more threads than CPUs", ""},
		{"uniform default", uniform, "", 4, false, "", 4, "", ""},
		{"uniform --cpus", uniform, "1-2", 4, false, "1-2", 2, "cpus 1-2", ""},
		{"outside the mask", uniform, "2-5", 4, false, "", 4, "", "--cpus 2-5: CPUs 4-5 are not in this process's affinity mask (0-3)"},
		{"a bad list", uniform, "1-", 4, false, "", 4, "", `"1-"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pinned []int
			pin := func(cpus []int) error { pinned = slices.Clone(cpus); return nil }
			threads := tc.threads
			line, got, err := placeOn(tc.cores, pin, tc.list, &threads, tc.tGiven)
			if tc.failure != "" {
				if err == nil || !strings.Contains(err.Error(), tc.failure) || pinned != nil {
					t.Fatalf("error %v (pinned %v), want one with %q and nothing pinned", err, pinned, tc.failure)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sysinfo.FormatCPUList(pinned) != tc.pinned || sysinfo.FormatCPUList(got) != tc.pinned || threads != tc.after {
				t.Errorf("pinned %v (returned %v), %d threads; want %q, %d", pinned, got, threads, tc.pinned, tc.after)
			}
			if !strings.Contains(line, tc.says) || (tc.says == "") != (line == "") {
				t.Errorf("line %q, want one with %q", line, tc.says)
			}
		})
	}
}

// TestDoctorCores: doctor lists each class and the default placement.
func TestDoctorCores(t *testing.T) {
	var b strings.Builder
	writeCores(&b, gb10Cores())
	out := b.String()
	for _, want := range []string{"2 classes by cpu_capacity", "big     cpus 5-9,15-19, capacity 1024, 10 cores", "little  cpus 0-4,10-14, capacity 650, 10 cores",
		"default: 10 threads pinned to the big cores 5-9,15-19"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor's cores lack %q:\n%s", want, out)
		}
	}
}

// TestCPUsFlag runs the commands with --cpus: a bad list and CPUs outside
// the affinity mask are usage errors naming them, and run on one CPU
// says where it runs and with how many threads.
func TestCPUsFlag(t *testing.T) {
	for _, args := range [][]string{
		{"run", "-m", "x.gguf", "-p", "hi", "--cpus", "1-x"},
		{"bench", "-m", "x.gguf", "--cpus", "3-1"},
		{"worker", "--listen", "127.0.0.1:0", "--cpus", ","},
	} {
		if _, errOut, code := braid(t, "", args...); code != 2 || !strings.Contains(errOut, "--cpus") || !strings.Contains(errOut, "in the CPU list") {
			t.Errorf("braid %v: exit %d, stderr %q; want a usage error naming the list", args, code, errOut)
		}
	}
	if _, errOut, code := braid(t, "", "worker", "--listen", "127.0.0.1:0", "--cpus", "4000"); code != 2 || !strings.Contains(errOut, "CPUs 4000 are not in this process's affinity mask") {
		t.Errorf("worker --cpus 4000: exit %d, stderr %q", code, errOut)
	}
	stories := shared + "/models/stories260K/stories260K-F32.gguf"
	needShared(t, stories)
	aff, err := sysinfo.Affinity()
	if err != nil {
		t.Skipf("no affinity here: %v", err)
	}
	cpu := sysinfo.FormatCPUList(aff[len(aff)-1:])
	_, errOut, code := braid(t, "", "run", "-m", stories, "-p", "Once", "-n", "2", "--temp", "0", "--cpus", cpu)
	if code != 0 || !strings.Contains(errOut, "braid: cpus "+cpu+" (--cpus), 1 threads") {
		t.Errorf("run --cpus %s: exit %d, stderr %q", cpu, code, errOut)
	}
}
