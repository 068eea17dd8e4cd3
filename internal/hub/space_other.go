//go:build !linux && !darwin && !freebsd

package hub

var freeSpace = func(dir string) (free int64, ok bool) { return 0, false }
