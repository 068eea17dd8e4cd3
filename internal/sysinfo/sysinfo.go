// Package sysinfo reports the facts of this node that decide what it can
// hold and run: memory available (MemAvailable and any cgroup limit — on
// unified-memory machines there is no separate GPU pool), cores, and the build
// digest that peers compare before they work together.
package sysinfo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// Memory is what the kernel says about memory on this node, in bytes. A zero
// field means the value is unknown (not Linux, or not limited).
type Memory struct {
	Total       uint64 // MemTotal
	Available   uint64 // MemAvailable: what can be allocated without swapping or evicting
	CgroupLimit uint64 // the cgroup's memory.max (v2) or limit_in_bytes (v1); 0 = no limit
	CgroupUsage uint64 // the cgroup's current usage, when limited
}

// Usable is the memory a load may plan on: MemAvailable, lowered to the
// cgroup's headroom when a cgroup limit is tighter.
func (m Memory) Usable() uint64 {
	u := m.Available
	if m.CgroupLimit > 0 {
		head := uint64(0)
		if m.CgroupLimit > m.CgroupUsage {
			head = m.CgroupLimit - m.CgroupUsage
		}
		if u == 0 || head < u {
			u = head
		}
	}
	return u
}

// ReadMemory reads /proc/meminfo and the cgroup files of this process.
func ReadMemory() (Memory, error) {
	var m Memory
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return m, fmt.Errorf("sysinfo: reading memory facts: %w", err)
	}
	m.Total, m.Available = parseMeminfo(data)
	m.CgroupLimit, m.CgroupUsage = readCgroup()
	return m, nil
}

// parseMeminfo returns MemTotal and MemAvailable in bytes from the text of
// /proc/meminfo (values there are in kB).
func parseMeminfo(data []byte) (total, avail uint64) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		if len(f) >= 3 && f[2] == "kB" {
			v *= 1024
		}
		switch f[0] {
		case "MemTotal:":
			total = v
		case "MemAvailable:":
			avail = v
		}
	}
	return total, avail
}

// readCgroup finds this process's memory limit, trying cgroup v2 then v1.
// "max" and the v1 "unlimited" sentinel (a page-rounded 2^63) mean no limit.
func readCgroup() (limit, usage uint64) {
	dir := "/sys/fs/cgroup"
	if data, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok && p != "/" {
				if _, err := os.Stat(dir + p + "/memory.max"); err == nil {
					dir += p
				}
			}
		}
	}
	if limit = readUint(dir + "/memory.max"); limit > 0 {
		return limit, readUint(dir + "/memory.current")
	}
	limit = readUint("/sys/fs/cgroup/memory/memory.limit_in_bytes")
	if limit >= 1<<62 {
		return 0, 0
	}
	return limit, readUint("/sys/fs/cgroup/memory/memory.usage_in_bytes")
}

func readUint(path string) uint64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0 // "max" and garbage alike: no limit known
	}
	return v
}

// Build identifies this binary: module version and VCS revision. Peers refuse
// to work with a different build, so the digest must change with the code.
type Build struct {
	Module   string
	Version  string
	Revision string // VCS revision, "" when built without VCS stamping
	Modified bool   // the working tree had uncommitted changes
	Go       string
}

// Revision may be set at link time (-ldflags "-X braid/internal/sysinfo.Revision=...")
// for builds made without VCS stamping.
var Revision string

// ReadBuild reads the build information embedded by the Go toolchain.
func ReadBuild() Build {
	b := Build{Go: runtime.Version(), Revision: Revision}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Module, b.Version = info.Main.Path, info.Main.Version
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// Digest is the short form compared in handshakes and printed by doctor.
func (b Build) Digest() string {
	rev := b.Revision
	if rev == "" {
		rev = "unknown-revision"
	} else if len(rev) > 12 {
		rev = rev[:12]
	}
	if b.Modified {
		rev += "+dirty"
	}
	return fmt.Sprintf("%s@%s %s %s", b.Module, b.Version, rev, b.Go)
}

// FormatBytes prints a byte count in binary units, as users read memory.
func FormatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for v := n / unit; v >= unit && exp < 5; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
