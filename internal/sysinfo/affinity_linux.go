package sysinfo

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Affinity returns the CPUs this process may run on (its
// sched_getaffinity mask: taskset, cgroup cpusets and container limits
// all narrow it).
func Affinity() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sysinfo: sched_getaffinity: %w", err)
	}
	var cpus []int
	for cpu := 0; cpu < len(set)*64; cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus, nil
}

// LocalCores reads this node's core classes within the affinity mask.
func LocalCores() Cores {
	cpus, err := Affinity()
	if err != nil {
		return Cores{}
	}
	return ReadCores("/", cpus)
}

// Pin restricts every thread of this process to cpus. Linux sets
// affinity per thread, and a new thread inherits its creator's: so each
// thread that exists is set, again until a pass finds no new one (the Go
// runtime may start threads meanwhile), and every later thread inherits
// the mask.
func Pin(cpus []int) error {
	var set unix.CPUSet
	for _, cpu := range cpus {
		if cpu < 0 || cpu >= len(set)*64 {
			return fmt.Errorf("sysinfo: CPU %d is beyond the %d this build can pin", cpu, len(set)*64)
		}
		set.Set(cpu)
	}
	if len(cpus) == 0 {
		return errors.New("sysinfo: pinning to no CPUs")
	}
	done := map[int]bool{}
	for pass := 0; pass < 10; pass++ {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("sysinfo: listing this process's threads: %w", err)
		}
		fresh := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh = true
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("sysinfo: pinning thread %d to CPUs %s: %w", tid, FormatCPUList(cpus), err)
			}
			done[tid] = true
		}
		if !fresh {
			return nil
		}
	}
	return fmt.Errorf("sysinfo: pinning to CPUs %s: threads kept appearing", FormatCPUList(cpus))
}
