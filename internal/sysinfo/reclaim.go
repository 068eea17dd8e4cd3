package sysinfo

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Reclaim is what this node's kernel is set to take back from processes
// without being short of memory, or when a limit is near: the settings
// that decide whether weights mapped from a file stay in memory. Fields
// that could not be read are zero (or -1 where zero means something).
type Reclaim struct {
	// Damon are the schemes of the running DAMON kdamonds (the sysfs
	// admin interface) whose action takes memory away: pageout, cold,
	// lru_deprio.
	Damon []DamonScheme
	// DamonReclaim says the damon_reclaim module is enabled: it pages out
	// memory idle for MinAge (its own parameters).
	DamonReclaim bool
	DamonMinAge  time.Duration
	// Swap are the swap devices and files (/proc/swaps); Swappiness is
	// vm.swappiness, -1 when unknown.
	Swap       []Swap
	Swappiness int
	// Zswap says zswap is enabled: swapped pages are compressed in memory.
	Zswap bool
	// MGLRU is /sys/kernel/mm/lru_gen/enabled ("" without multi-gen LRU);
	// MinTTL its min_ttl_ms, the age under which the working set is kept
	// even under pressure (0: none).
	MGLRU  string
	MinTTL time.Duration
	// Cgroup is this process's memory cgroup's limits.
	Cgroup CgroupLimits
}

// DamonScheme is one DAMON scheme: what it does to which memory.
type DamonScheme struct {
	// Where names it: kdamond K, context C, scheme S.
	Kdamond, Context, Scheme int
	// Ops is what the context watches: paddr (all physical memory),
	// vaddr or fvaddr (some processes).
	Ops    string
	Action string
	// MinAge is how long a region must have gone unaccessed for the
	// scheme to act on it (its minimum age in aggregation intervals).
	MinAge time.Duration
	// Filters are its filters in the order the kernel applies them.
	Filters []DamonFilter
	// QuotaBytes is the most it acts on per reset interval (0 = no quota).
	QuotaBytes uint64
	QuotaReset time.Duration
}

// DamonFilter is one DAMOS filter: memory of Type (or, Matching false,
// memory not of it) is allowed to the scheme or rejected.
type DamonFilter struct {
	Type            string
	Matching, Allow bool
}

func (f DamonFilter) String() string {
	t := f.Type
	if !f.Matching {
		t = "not " + t
	}
	if f.Allow {
		return t + ": allow"
	}
	return t + ": reject"
}

// The kinds of memory a model's weights can be in.
const (
	// MemAnon is anonymous memory: --load-mode read's copy.
	MemAnon = "anon"
	// MemMapped is file pages a process maps: mmap's weights while braid
	// runs.
	MemMapped = "mapped file"
	// MemUnmapped is file pages no process maps: a model file's page
	// cache between runs.
	MemUnmapped = "unmapped file"
)

// Acts says whether the scheme's action reaches memory of kind (MemAnon,
// MemMapped, MemUnmapped); known is false when a filter of another type
// (a memory cgroup, an address range, young pages, ...) decides. The
// kernel applies the first filter that matches; memory that no filter
// matches gets the opposite of the last filter (allow: reject), and with
// no filters the scheme acts on all. Kernels before allow filters had
// reject filters only, which the same rule covers.
func (s DamonScheme) Acts(kind string) (acts, known bool) {
	for _, f := range s.Filters {
		var is bool
		switch f.Type {
		case "anon":
			is = kind == MemAnon
		case "unmapped":
			is = kind == MemUnmapped
		default:
			return false, false
		}
		if is == f.Matching {
			return f.Allow, true
		}
	}
	if len(s.Filters) == 0 {
		return true, true
	}
	return !s.Filters[len(s.Filters)-1].Allow, true
}

// Swap is one swap area.
type Swap struct {
	Name       string
	Size, Used uint64 // bytes
}

// CgroupLimits are the memory limits of this process's cgroup, in bytes;
// 0 means none (or unknown).
type CgroupLimits struct {
	// Version is 2 (unified) or 1; 0 when no memory cgroup was found.
	Version int
	Path    string
	// Max is the hard limit (v2 memory.max, v1 memory.limit_in_bytes);
	// High the throttling and reclaim threshold (v2 memory.high, v1
	// memory.soft_limit_in_bytes); SwapMax the swap limit (v2
	// memory.swap.max; v1 memsw is memory plus swap and is not shown).
	Max, High, SwapMax uint64
	// SwapMaxSet says SwapMax was read (memory.swap.max "0" forbids swap).
	SwapMaxSet bool
}

// ReadReclaim reads the reclaim settings under root ("/" for this node;
// tests pass a fake tree). Missing files leave their fields zero.
func ReadReclaim(root string) Reclaim {
	r := Reclaim{Swappiness: -1}
	r.Damon = readDamon(filepath.Join(root, "sys/kernel/mm/damon/admin/kdamonds"))
	if readTrim(filepath.Join(root, "sys/module/damon_reclaim/parameters/enabled")) == "Y" {
		r.DamonReclaim = true
		if us, ok := readInt(filepath.Join(root, "sys/module/damon_reclaim/parameters/min_age")); ok {
			r.DamonMinAge = time.Duration(us) * time.Microsecond
		}
	}
	r.Swap = parseSwaps(readTrim(filepath.Join(root, "proc/swaps")))
	if v, ok := readInt(filepath.Join(root, "proc/sys/vm/swappiness")); ok {
		r.Swappiness = int(v)
	}
	r.Zswap = readTrim(filepath.Join(root, "sys/module/zswap/parameters/enabled")) == "Y"
	r.MGLRU = readTrim(filepath.Join(root, "sys/kernel/mm/lru_gen/enabled"))
	if ms, ok := readInt(filepath.Join(root, "sys/kernel/mm/lru_gen/min_ttl_ms")); ok {
		r.MinTTL = time.Duration(ms) * time.Millisecond
	}
	r.Cgroup = readCgroupLimits(root)
	return r
}

// readDamon lists the reclaiming schemes of the kdamonds that are on.
func readDamon(dir string) []DamonScheme {
	var out []DamonScheme
	for _, k := range numbered(dir) {
		kd := filepath.Join(dir, strconv.Itoa(k))
		if readTrim(filepath.Join(kd, "state")) != "on" {
			continue
		}
		for _, c := range numbered(filepath.Join(kd, "contexts")) {
			cd := filepath.Join(kd, "contexts", strconv.Itoa(c))
			ops := readTrim(filepath.Join(cd, "operations"))
			aggr, _ := readInt(filepath.Join(cd, "monitoring_attrs/intervals/aggr_us"))
			for _, s := range numbered(filepath.Join(cd, "schemes")) {
				sd := filepath.Join(cd, "schemes", strconv.Itoa(s))
				action := readTrim(filepath.Join(sd, "action"))
				switch action {
				case "pageout", "cold", "lru_deprio":
				default:
					continue // stat, hugepage, migrate_*: nothing taken away
				}
				sc := DamonScheme{Kdamond: k, Context: c, Scheme: s, Ops: ops, Action: action}
				if age, ok := readInt(filepath.Join(sd, "access_pattern/age/min")); ok && aggr > 0 {
					sc.MinAge = time.Duration(age*aggr) * time.Microsecond
				}
				sc.QuotaBytes, _ = readUintOK(filepath.Join(sd, "quotas/bytes"))
				if ms, ok := readInt(filepath.Join(sd, "quotas/reset_interval_ms")); ok {
					sc.QuotaReset = time.Duration(ms) * time.Millisecond
				}
				// Newer kernels split the filters into core_filters and
				// ops_filters; older ones have filters only.
				for _, sub := range []string{"core_filters", "ops_filters", "filters"} {
					fd := filepath.Join(sd, sub)
					for _, f := range numbered(fd) {
						ff := filepath.Join(fd, strconv.Itoa(f))
						typ := readTrim(filepath.Join(ff, "type"))
						if typ == "" {
							continue
						}
						// Kernels before allow filters (6.14) have no
						// allow file: their filters all reject.
						sc.Filters = append(sc.Filters, DamonFilter{Type: typ,
							Matching: readTrim(filepath.Join(ff, "matching")) != "N",
							Allow:    readTrim(filepath.Join(ff, "allow")) == "Y"})
					}
				}
				out = append(out, sc)
			}
		}
	}
	return out
}

// numbered lists the entries of dir named by numbers, in order (DAMON's
// sysfs numbers kdamonds, contexts, schemes and filters from 0).
func numbered(dir string) []int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var ns []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
			ns = append(ns, n)
		}
	}
	sort.Ints(ns)
	return ns
}

// parseSwaps reads /proc/swaps (sizes in KiB).
func parseSwaps(text string) []Swap {
	var out []Swap
	for i, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 4 {
			continue // the header
		}
		size, err1 := strconv.ParseUint(f[2], 10, 64)
		used, err2 := strconv.ParseUint(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, Swap{Name: f[0], Size: size << 10, Used: used << 10})
	}
	return out
}

// readCgroupLimits finds this process's memory cgroup under root: the
// unified hierarchy's (the "0::" line of /proc/self/cgroup), else v1's
// memory controller.
func readCgroupLimits(root string) CgroupLimits {
	var v1, v2 string
	for _, line := range strings.Split(readTrim(filepath.Join(root, "proc/self/cgroup")), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case strings.Contains(","+parts[1]+",", ",memory,"):
			v1 = parts[2]
		}
	}
	var l CgroupLimits
	if v1 != "" {
		dir := filepath.Join(root, "sys/fs/cgroup/memory", v1)
		if _, err := os.Stat(filepath.Join(dir, "memory.limit_in_bytes")); err == nil {
			l = CgroupLimits{Version: 1, Path: v1}
			l.Max = v1Limit(filepath.Join(dir, "memory.limit_in_bytes"))
			l.High = v1Limit(filepath.Join(dir, "memory.soft_limit_in_bytes"))
			return l
		}
	}
	if v2 != "" {
		dir := filepath.Join(root, "sys/fs/cgroup", v2)
		if _, err := os.Stat(filepath.Join(dir, "memory.max")); err == nil {
			l = CgroupLimits{Version: 2, Path: v2}
			l.Max, _ = readUintOK(filepath.Join(dir, "memory.max"))
			l.High, _ = readUintOK(filepath.Join(dir, "memory.high"))
			l.SwapMax, l.SwapMaxSet = readUintOK(filepath.Join(dir, "memory.swap.max"))
		}
	}
	return l
}

// v1Limit reads a v1 limit; the "unlimited" sentinel (a page-rounded
// 2^63) reads as none.
func v1Limit(path string) uint64 {
	v, _ := readUintOK(path)
	if v >= 1<<62 {
		return 0
	}
	return v
}

func readTrim(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func readInt(path string) (int64, bool) {
	v, err := strconv.ParseInt(readTrim(path), 10, 64)
	return v, err == nil
}

// readUintOK reads a number; "max" and garbage read as (0, false).
func readUintOK(path string) (uint64, bool) {
	v, err := strconv.ParseUint(readTrim(path), 10, 64)
	return v, err == nil
}

// SwapTotal is the size of all swap areas.
func (r Reclaim) SwapTotal() uint64 {
	var n uint64
	for _, s := range r.Swap {
		n += s.Size
	}
	return n
}

// Findings says, one line each, what the settings mean for a model's
// weights: which take file pages (mmap's) or anonymous memory (read's)
// away while braid runs, and what to use against them. Empty when
// nothing reclaims ahead of need.
func (r Reclaim) Findings() []string {
	var out []string
	swap := r.SwapTotal() > 0 && !(r.Cgroup.SwapMaxSet && r.Cgroup.SwapMax == 0)
	for _, s := range r.Damon {
		line := fmt.Sprintf("DAMON kdamond %d scheme %d: %s of %s memory", s.Kdamond, s.Scheme, s.Action, s.Ops)
		if s.MinAge > 0 {
			line += " idle for " + s.MinAge.String()
		}
		if len(s.Filters) > 0 {
			fs := make([]string, len(s.Filters))
			for i, f := range s.Filters {
				fs[i] = f.String()
			}
			line += " (filters: " + strings.Join(fs, ", ") + ")"
		}
		mapped, known := s.Acts(MemMapped)
		anon, _ := s.Acts(MemAnon)
		unmapped, _ := s.Acts(MemUnmapped)
		switch {
		case !known:
			line += "; its filters decide by memory cgroup, address or access, so it may take mapped weights: --load-mode read or mlock is the safe choice"
		case mapped:
			line += "; it takes weights mapped from the file (--load-mode mmap) that go untouched that long, as between requests, to be read again from disk"
			switch {
			case !anon:
				line += "; it leaves anonymous memory alone, so --load-mode read keeps them"
			case !swap:
				line += "; without swap it cannot page out anonymous memory, so --load-mode read keeps them"
			default:
				line += "; with swap it pages out anonymous memory too: --load-mode mlock keeps them"
			}
		case unmapped:
			line += "; it takes only file pages no process maps (a model file's page cache between runs: each start reads the file from disk again), not a running braid's weights"
			if anon && swap {
				line += ", but anonymous memory too, to swap: --load-mode mlock keeps them"
			}
		case anon && swap:
			line += "; it pages anonymous memory out to swap: --load-mode mmap or mlock keeps the weights"
		default:
			line += "; it does not reach a model's weights"
		}
		out = append(out, line)
	}
	if r.DamonReclaim {
		out = append(out, fmt.Sprintf("damon_reclaim is enabled: memory idle for %s is paged out; use --load-mode read (mlock where swap is on)", r.DamonMinAge))
	}
	if swap {
		line := fmt.Sprintf("swap: %s", FormatBytes(r.SwapTotal()))
		if r.Swappiness >= 0 {
			line += fmt.Sprintf(", swappiness %d", r.Swappiness)
		}
		if r.Zswap {
			line += ", zswap on (swapped pages compressed in memory)"
		}
		out = append(out, line+"; under pressure even weights read into anonymous memory (--load-mode read) can be swapped out: --load-mode mlock pins them")
	}
	if r.Cgroup.High > 0 {
		out = append(out, fmt.Sprintf("cgroup %s: memory.high %s: above it the kernel reclaims this cgroup's pages, mapped weights first; keep the model, KV cache and the rest below it, or use --load-mode read",
			r.Cgroup.Path, FormatBytes(r.Cgroup.High)))
	}
	if r.Cgroup.Max > 0 {
		out = append(out, fmt.Sprintf("cgroup %s: memory limit %s: page cache (mmap's weights) counts against it and is reclaimed near it; braid plans on what is left of it",
			r.Cgroup.Path, FormatBytes(r.Cgroup.Max)))
	}
	if r.MinTTL > 0 {
		out = append(out, fmt.Sprintf("multi-gen LRU min_ttl_ms %d: pages used in the last %s are kept even under pressure, a decode step's weights among them", r.MinTTL.Milliseconds(), r.MinTTL))
	}
	return out
}
