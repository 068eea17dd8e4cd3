//go:build unix

package model

import "syscall"

// cpuSeconds is the process's CPU time so far (user and system, every
// thread), for benchmarks on a machine others share: it moves with the
// work done, not with the time spent waiting for a core.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
