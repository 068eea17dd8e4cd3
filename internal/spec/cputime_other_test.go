//go:build !linux

package spec

import "time"

// threadCPU is not measured off Linux.
func threadCPU() (time.Duration, bool) { return 0, false }
