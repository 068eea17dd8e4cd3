//go:build linux || darwin || freebsd

package main

import "golang.org/x/sys/unix"

// freeSpace returns the bytes an unprivileged user may still write to the
// file system holding dir.
func freeSpace(dir string) (free uint64, ok bool, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true, nil
}
