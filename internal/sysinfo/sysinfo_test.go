package sysinfo

import (
	"os"
	"strings"
	"testing"
)

func TestParseMeminfo(t *testing.T) {
	tests := []struct {
		name         string
		in           string
		total, avail uint64
	}{
		{"normal", "MemTotal:       24000000 kB\nMemFree:  1 kB\nMemAvailable:   23000000 kB\n", 24000000 * 1024, 23000000 * 1024},
		{"no available", "MemTotal: 10 kB\n", 10240, 0},
		{"garbage", "MemTotal: lots kB\nnonsense\n\n", 0, 0},
		{"empty", "", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			total, avail := parseMeminfo([]byte(tc.in))
			if total != tc.total || avail != tc.avail {
				t.Fatalf("got total=%d avail=%d, want %d %d", total, avail, tc.total, tc.avail)
			}
		})
	}
}

func TestUsable(t *testing.T) {
	tests := []struct {
		m    Memory
		want uint64
	}{
		{Memory{Available: 100}, 100},
		{Memory{Available: 100, CgroupLimit: 50, CgroupUsage: 10}, 40},
		{Memory{Available: 30, CgroupLimit: 50, CgroupUsage: 10}, 30},
		{Memory{Available: 30, CgroupLimit: 50, CgroupUsage: 60}, 0},
	}
	for _, tc := range tests {
		if got := tc.m.Usable(); got != tc.want {
			t.Errorf("%+v.Usable() = %d, want %d", tc.m, got, tc.want)
		}
	}
}

func TestReadMemoryHere(t *testing.T) {
	m, err := ReadMemory()
	if err != nil {
		t.Skipf("no /proc/meminfo on this system: %v", err)
	}
	if m.Total == 0 || m.Available == 0 || m.Available > m.Total {
		t.Fatalf("implausible memory facts: %+v", m)
	}
}

func TestFormatBytes(t *testing.T) {
	tests := map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.00 KiB", 3 << 30: "3.00 GiB", 1536 << 20: "1.50 GiB"}
	for in, want := range tests {
		if got := FormatBytes(in); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestDigestNamesRevision(t *testing.T) {
	b := Build{Module: "braid", Version: "(devel)", Revision: "0123456789abcdef", Modified: true, Go: "go1.26"}
	if got, want := b.Digest(), "braid@(devel) 0123456789ab+dirty go1.26"; got != want {
		t.Fatalf("Digest() = %q, want %q", got, want)
	}
}

// TestInMemoryFS checks /dev/shm against its mount type in /proc/mounts,
// and a missing path.
func TestInMemoryFS(t *testing.T) {
	if InMemoryFS("/nonexistent/path") {
		t.Error("a missing path is reported in memory")
	}
	mounts, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Skipf("no /proc/mounts: %v", err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[1] == "/dev/shm" {
			want := f[2] == "tmpfs" || f[2] == "ramfs"
			if got := InMemoryFS("/dev/shm"); got != want {
				t.Errorf("/dev/shm mounted as %s: InMemoryFS says %v", f[2], got)
			}
			return
		}
	}
	t.Skip("no /dev/shm mount")
}
