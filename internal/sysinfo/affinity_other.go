//go:build !linux

package sysinfo

import "errors"

// Affinity is read on Linux only.
func Affinity() ([]int, error) { return nil, errors.New("sysinfo: CPU affinity is read on Linux only") }

// LocalCores knows no classes off Linux: braid runs on every CPU.
func LocalCores() Cores { return Cores{} }

// Pin is Linux's only.
func Pin([]int) error {
	return errors.New("sysinfo: pinning to CPUs (--cpus) is supported on Linux only")
}
