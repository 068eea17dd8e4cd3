//go:build !linux

package sysinfo

// InMemoryFS reports whether path lies on an in-memory file system; only
// Linux is checked.
func InMemoryFS(path string) bool { return false }
