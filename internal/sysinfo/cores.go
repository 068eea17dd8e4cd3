package sysinfo

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// CoreClass is a set of logical CPUs of like speed: big cores, little
// cores, or every core of a uniform machine.
type CoreClass struct {
	// CPUs are the class's logical CPUs this process may run on, in order.
	CPUs []int
	// Cores is how many physical cores they are (fewer than CPUs with
	// SMT).
	Cores int
	// Capacity is the highest cpu_capacity in the class (the kernel's
	// scale, 1024 for the fastest core of the machine); MaxMHz the highest
	// maximum frequency. Zero when sysfs does not say.
	Capacity int
	MaxMHz   int
}

// Cores are this process's CPUs sorted into classes, fastest first.
type Cores struct {
	Classes []CoreClass
	// By is what told the classes apart: "cpu_capacity",
	// "cpuinfo_max_freq", or "" (neither is readable for every CPU: one
	// class).
	By string
	// Allowed is the affinity mask the classes were read within.
	Allowed []int
}

// Hybrid says the CPUs are of more than one class.
func (c Cores) Hybrid() bool { return len(c.Classes) > 1 }

// Fast is the fastest class's CPUs: those braid runs on by default.
func (c Cores) Fast() []int {
	if len(c.Classes) == 0 {
		return c.Allowed
	}
	return c.Classes[0].CPUs
}

// sameClass is how close two speeds must be to count as one class: the
// favoured cores of Intel's Turbo Boost Max 3.0 run a few percent faster
// than the other P-cores (5.8 against 5.5 GHz) and are not a class of
// their own, while E-cores (4.3 GHz) and Arm's little cores (capacity
// ~650 of 1024) are far below.
const sameClass = 0.85

// ReadCores reads the classes of the CPUs in allowed from the sysfs tree
// under root ("/" for this node; tests pass fake trees): cpu_capacity
// where every allowed CPU has one, else cpufreq's cpuinfo_max_freq, and
// the SMT siblings from topology/core_cpus_list (thread_siblings_list on
// older kernels).
func ReadCores(root string, allowed []int) Cores {
	allowed = slices.Clone(allowed)
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)
	c := Cores{Allowed: allowed}
	if len(allowed) == 0 {
		return c
	}
	dir := filepath.Join(root, "sys/devices/system/cpu")
	speeds := map[string][]int{"cpu_capacity": nil, "cpuinfo_max_freq": nil}
	core := make([]string, len(allowed))
	for i, cpu := range allowed {
		d := filepath.Join(dir, "cpu"+strconv.Itoa(cpu))
		if v, ok := readInt(filepath.Join(d, "cpu_capacity")); ok && v > 0 {
			speeds["cpu_capacity"] = append(speeds["cpu_capacity"], int(v))
		}
		if v, ok := readInt(filepath.Join(d, "cpufreq/cpuinfo_max_freq")); ok && v > 0 {
			speeds["cpuinfo_max_freq"] = append(speeds["cpuinfo_max_freq"], int(v))
		}
		core[i] = readTrim(filepath.Join(d, "topology/core_cpus_list"))
		if core[i] == "" {
			core[i] = readTrim(filepath.Join(d, "topology/thread_siblings_list"))
		}
		if core[i] == "" {
			core[i] = strconv.Itoa(cpu) // no topology: each CPU its own core
		}
	}
	speed := make([]int, len(allowed)) // all zero: one class
	for _, by := range []string{"cpu_capacity", "cpuinfo_max_freq"} {
		if len(speeds[by]) == len(allowed) {
			c.By, speed = by, speeds[by]
			break
		}
	}
	// Classes from the fastest down: a CPU joins the current class while
	// its speed is within sameClass of the class's fastest.
	order := make([]int, len(allowed))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return speed[b] - speed[a] })
	top := -1
	for _, i := range order {
		if top < 0 || float64(speed[i]) < sameClass*float64(top) {
			c.Classes = append(c.Classes, CoreClass{})
			top = speed[i]
		}
		cl := &c.Classes[len(c.Classes)-1]
		cl.CPUs = append(cl.CPUs, allowed[i])
	}
	for k := range c.Classes {
		cl := &c.Classes[k]
		slices.Sort(cl.CPUs)
		seen := map[string]bool{}
		for _, cpu := range cl.CPUs {
			i := slices.Index(allowed, cpu)
			seen[core[i]] = true
			d := filepath.Join(dir, "cpu"+strconv.Itoa(cpu))
			if v, ok := readInt(filepath.Join(d, "cpu_capacity")); ok {
				cl.Capacity = max(cl.Capacity, int(v))
			}
			if v, ok := readInt(filepath.Join(d, "cpufreq/cpuinfo_max_freq")); ok {
				cl.MaxMHz = max(cl.MaxMHz, int(v/1000))
			}
		}
		cl.Cores = len(seen)
	}
	return c
}

// Describe is one line for the class: its CPUs, speed and cores.
func (cl CoreClass) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cpus %s", FormatCPUList(cl.CPUs))
	if cl.Capacity > 0 {
		fmt.Fprintf(&b, ", capacity %d", cl.Capacity)
	}
	if cl.MaxMHz > 0 {
		fmt.Fprintf(&b, ", max %d MHz", cl.MaxMHz)
	}
	if cl.Cores < len(cl.CPUs) {
		fmt.Fprintf(&b, ", %d cores x %d threads", cl.Cores, len(cl.CPUs)/max(cl.Cores, 1))
	} else {
		fmt.Fprintf(&b, ", %d cores", cl.Cores)
	}
	return b.String()
}

// ParseCPUList reads a CPU list as Linux writes them: "5-9,15-19", "0,2",
// "3". The CPUs come back sorted, each once.
func ParseCPUList(s string) ([]int, error) {
	var out []int
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("an empty CPU list")
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b >= 1<<16 {
			return nil, fmt.Errorf("%q in the CPU list %q is not a CPU number or a range like 5-9", part, s)
		}
		for cpu := a; cpu <= b; cpu++ {
			out = append(out, cpu)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatCPUList writes CPUs as Linux does: runs as ranges, "0-4,10-14".
func FormatCPUList(cpus []int) string {
	s := slices.Clone(cpus)
	slices.Sort(s)
	s = slices.Compact(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		} else {
			parts = append(parts, strconv.Itoa(s[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
