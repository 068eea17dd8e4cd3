//go:build linux || darwin || freebsd

package hub

import "golang.org/x/sys/unix"

// freeSpace is diskFree, replaced in tests of a full disk.
var freeSpace = diskFree

// freeSpace is the bytes an unprivileged writer may still use on the file
// system holding dir; ok is false when it cannot be known.
func diskFree(dir string) (free int64, ok bool) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
