package sysinfo

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// cpuTree describes a machine to write as a fake sysfs tree: per CPU its
// capacity and maximum kHz (0: no file) and its core's CPU list.
type cpuTree struct {
	capacity, maxKHz map[int]int
	core             map[int]string
	n                int
}

func (m cpuTree) files() map[string]string {
	f := map[string]string{}
	for cpu := 0; cpu < m.n; cpu++ {
		d := fmt.Sprintf("sys/devices/system/cpu/cpu%d/", cpu)
		if v := m.capacity[cpu]; v > 0 {
			f[d+"cpu_capacity"] = fmt.Sprint(v)
		}
		if v := m.maxKHz[cpu]; v > 0 {
			f[d+"cpufreq/cpuinfo_max_freq"] = fmt.Sprint(v)
		}
		if c, ok := m.core[cpu]; ok {
			f[d+"topology/core_cpus_list"] = c
		}
	}
	return f
}

func span(lo, hi int) []int {
	var s []int
	for i := lo; i <= hi; i++ {
		s = append(s, i)
	}
	return s
}

// gb10 is NVIDIA's GB10: ten Cortex-X925 at cpus 5-9 and 15-19, ten
// Cortex-A725 at 0-4 and 10-14, no SMT. withCap writes cpu_capacity (1024
// and 650), withFreq cpuinfo_max_freq (3.9 and 2.8 GHz).
func gb10(withCap, withFreq bool) cpuTree {
	m := cpuTree{n: 20, capacity: map[int]int{}, maxKHz: map[int]int{}, core: map[int]string{}}
	for cpu := 0; cpu < 20; cpu++ {
		big := cpu%10 >= 5
		m.core[cpu] = fmt.Sprint(cpu)
		if withCap {
			m.capacity[cpu] = map[bool]int{true: 1024, false: 650}[big]
		}
		if withFreq {
			m.maxKHz[cpu] = map[bool]int{true: 3900000, false: 2808000}[big]
		}
	}
	return m
}

// raptorLake is an Intel hybrid: 8 P-cores with SMT at cpus 0-15
// (siblings 2k, 2k+1; the two favoured cores 5.8 GHz, the rest 5.5) and
// 16 E-cores at 16-31 (4.3 GHz), no cpu_capacity.
func raptorLake() cpuTree {
	m := cpuTree{n: 32, maxKHz: map[int]int{}, core: map[int]string{}}
	for cpu := 0; cpu < 32; cpu++ {
		switch {
		case cpu < 4:
			m.maxKHz[cpu], m.core[cpu] = 5800000, fmt.Sprintf("%d-%d", cpu&^1, cpu|1)
		case cpu < 16:
			m.maxKHz[cpu], m.core[cpu] = 5500000, fmt.Sprintf("%d-%d", cpu&^1, cpu|1)
		default:
			m.maxKHz[cpu], m.core[cpu] = 4300000, fmt.Sprint(cpu)
		}
	}
	return m
}

func TestReadCores(t *testing.T) {
	type class struct {
		cpus            string
		cores, cap, mhz int
	}
	uniform := cpuTree{n: 8, capacity: map[int]int{}, maxKHz: map[int]int{}, core: map[int]string{}}
	for cpu := 0; cpu < 8; cpu++ {
		uniform.capacity[cpu], uniform.maxKHz[cpu], uniform.core[cpu] = 1024, 3000000, fmt.Sprintf("%d,%d", cpu%4, cpu%4+4)
	}
	tests := []struct {
		name    string
		m       cpuTree
		allowed []int
		by      string
		classes []class
	}{
		{"GB10 by capacity", gb10(true, true), span(0, 19), "cpu_capacity",
			[]class{{"5-9,15-19", 10, 1024, 3900}, {"0-4,10-14", 10, 650, 2808}}},
		{"GB10 by max frequency only", gb10(false, true), span(0, 19), "cpuinfo_max_freq",
			[]class{{"5-9,15-19", 10, 0, 3900}, {"0-4,10-14", 10, 0, 2808}}},
		{"GB10 in a mask of two big and three little", gb10(true, false), []int{0, 1, 2, 7, 19}, "cpu_capacity",
			[]class{{"7,19", 2, 1024, 0}, {"0-2", 3, 650, 0}}},
		{"GB10 in a mask of little cores only", gb10(true, false), []int{10, 11}, "cpu_capacity",
			[]class{{"10-11", 2, 650, 0}}},
		{"uniform with SMT", uniform, span(0, 7), "cpu_capacity",
			[]class{{"0-7", 4, 1024, 3000}}},
		{"no cpufreq, no capacity, no topology", cpuTree{n: 4}, span(0, 3), "",
			[]class{{"0-3", 4, 0, 0}}},
		// The favoured P-cores (5.8 GHz) are one class with the rest.
		{"Intel hybrid with SMT", raptorLake(), span(0, 31), "cpuinfo_max_freq",
			[]class{{"0-15", 8, 0, 5800}, {"16-31", 16, 0, 4300}}},
		// A capacity file missing on one CPU: max frequency decides.
		{"capacity on some CPUs only", func() cpuTree { m := gb10(true, true); delete(m.capacity, 3); return m }(), span(0, 19), "cpuinfo_max_freq",
			[]class{{"5-9,15-19", 10, 1024, 3900}, {"0-4,10-14", 10, 650, 2808}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ReadCores(tree(t, tc.m.files()), tc.allowed)
			if c.By != tc.by {
				t.Errorf("classes by %q, want %q", c.By, tc.by)
			}
			var got []class
			for _, cl := range c.Classes {
				got = append(got, class{FormatCPUList(cl.CPUs), cl.Cores, cl.Capacity, cl.MaxMHz})
			}
			if !slices.Equal(got, tc.classes) {
				t.Errorf("classes %+v, want %+v", got, tc.classes)
			}
			if c.Hybrid() != (len(tc.classes) > 1) || FormatCPUList(c.Fast()) != tc.classes[0].cpus {
				t.Errorf("hybrid %v, fast %v", c.Hybrid(), c.Fast())
			}
		})
	}
	if c := ReadCores(t.TempDir(), nil); c.Hybrid() || len(c.Classes) != 0 || c.Fast() != nil {
		t.Errorf("no CPUs allowed: %+v", c)
	}
}

func TestDescribeClass(t *testing.T) {
	c := ReadCores(tree(t, raptorLake().files()), span(0, 31))
	if got, want := c.Classes[0].Describe(), "cpus 0-15, max 5800 MHz, 8 cores x 2 threads"; got != want {
		t.Errorf("P-cores: %q, want %q", got, want)
	}
	c = ReadCores(tree(t, gb10(true, false).files()), span(0, 19))
	if got, want := c.Classes[1].Describe(), "cpus 0-4,10-14, capacity 650, 10 cores"; got != want {
		t.Errorf("GB10 little: %q, want %q", got, want)
	}
}

func TestCPUList(t *testing.T) {
	for in, want := range map[string]string{"5-9,15-19": "5-9,15-19", "3": "3", "0,2,1": "0-2", "7-7,1 ,2-3": "1-3,7", "4,4-5": "4-5"} {
		cpus, err := ParseCPUList(in)
		if err != nil || FormatCPUList(cpus) != want {
			t.Errorf("ParseCPUList(%q) = %v, %v; formats as %q, want %q", in, cpus, err, FormatCPUList(cpus), want)
		}
	}
	for _, in := range []string{"", "a", "5-", "-3", "9-5", "1,,2", "0x3", "70000"} {
		if _, err := ParseCPUList(in); err == nil || (in != "" && !strings.Contains(err.Error(), fmt.Sprintf("%q", in))) {
			t.Errorf("ParseCPUList(%q): %v, want an error naming the list", in, err)
		}
	}
}
