package sysinfo

import "syscall"

// InMemoryFS reports whether path lies on a file system whose files live
// in memory (tmpfs, ramfs): mapping such a file takes no memory beyond what
// the file already holds, and that memory is not in MemAvailable.
func InMemoryFS(path string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return false
	}
	const tmpfsMagic, ramfsMagic = 0x01021994, 0x858458f6
	return st.Type == tmpfsMagic || st.Type == ramfsMagic
}
