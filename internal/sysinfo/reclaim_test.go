package sysinfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tree writes files (path relative to root: content) under a new root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// damonScheme is a kdamond 0 context 0 scheme 0 on paddr with the given
// action and filters (type, matching, allow; allow "" for a kernel that
// has no allow file), aggregation 100 ms and minimum age 50 intervals.
func damonScheme(state, action string, filters ...[3]string) map[string]string {
	const k = "sys/kernel/mm/damon/admin/kdamonds/"
	m := map[string]string{
		k + "nr_kdamonds":             "1",
		k + "0/state":                 state,
		k + "0/contexts/0/operations": "paddr",
		k + "0/contexts/0/monitoring_attrs/intervals/aggr_us": "100000",
		k + "0/contexts/0/schemes/0/action":                   action,
		k + "0/contexts/0/schemes/0/access_pattern/age/min":   "50",
		k + "0/contexts/0/schemes/0/quotas/bytes":             "134217728",
		k + "0/contexts/0/schemes/0/quotas/reset_interval_ms": "1000",
		k + "0/contexts/0/schemes/0/ops_filters/nr_filters":   "0",
	}
	for i, f := range filters {
		d := k + "0/contexts/0/schemes/0/ops_filters/" + string(rune('0'+i)) + "/"
		m[d+"type"], m[d+"matching"] = f[0], f[1]
		if f[2] != "" {
			m[d+"allow"] = f[2]
		}
	}
	return m
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestReadReclaimDamon(t *testing.T) {
	noSwap := map[string]string{"proc/swaps": "Filename\tType\tSize\tUsed\tPriority", "proc/sys/vm/swappiness": "60"}
	swap := map[string]string{"proc/swaps": "Filename\tType\tSize\tUsed\tPriority\n/swapfile file 8388604 1024 -2", "proc/sys/vm/swappiness": "10"}
	tests := []struct {
		name  string
		files map[string]string
		// what the scheme reaches: anon, mapped file, unmapped file
		acts [3]bool
		// a phrase the finding must hold
		says string
	}{
		// This project's machines: anonymous memory rejected, unmapped
		// page cache allowed, the rest (mapped file pages) rejected as
		// the opposite of the last filter.
		{"pageout of unmapped file pages", merge(noSwap, damonScheme("on", "pageout", [3]string{"anon", "Y", "N"}, [3]string{"unmapped", "Y", "Y"})),
			[3]bool{false, false, true}, "takes only file pages no process maps"},
		{"pageout of all", merge(noSwap, damonScheme("on", "pageout")),
			[3]bool{true, true, true}, "without swap it cannot page out anonymous memory, so --load-mode read keeps them"},
		{"pageout of all with swap", merge(swap, damonScheme("on", "pageout")),
			[3]bool{true, true, true}, "--load-mode mlock keeps them"},
		// An old kernel: no allow file, every filter rejects.
		{"old kernel, anon filtered out", merge(swap, damonScheme("on", "pageout", [3]string{"anon", "Y", ""})),
			[3]bool{false, true, true}, "it leaves anonymous memory alone, so --load-mode read keeps them"},
		{"only anon allowed", merge(swap, damonScheme("on", "pageout", [3]string{"anon", "Y", "Y"})),
			[3]bool{true, false, false}, "pages anonymous memory out to swap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := ReadReclaim(tree(t, tc.files))
			if len(r.Damon) != 1 {
				t.Fatalf("%d schemes read, want 1: %+v", len(r.Damon), r.Damon)
			}
			s := r.Damon[0]
			if s.Action != "pageout" || s.Ops != "paddr" || s.MinAge != 5*time.Second || s.QuotaBytes != 128<<20 || s.QuotaReset != time.Second {
				t.Errorf("scheme read as %+v", s)
			}
			for i, kind := range []string{MemAnon, MemMapped, MemUnmapped} {
				if acts, known := s.Acts(kind); !known || acts != tc.acts[i] {
					t.Errorf("acts on %s: %v (known %v), want %v", kind, acts, known, tc.acts[i])
				}
			}
			f := r.Findings()
			if len(f) == 0 || !strings.Contains(f[0], tc.says) || !strings.Contains(f[0], "idle for 5s") {
				t.Errorf("findings %q: the first should say %q", f, tc.says)
			}
		})
	}
	// A kdamond that is off, and schemes that take nothing, are left out.
	if r := ReadReclaim(tree(t, damonScheme("off", "pageout"))); len(r.Damon) != 0 {
		t.Errorf("an off kdamond's scheme was read: %+v", r.Damon)
	}
	if r := ReadReclaim(tree(t, damonScheme("on", "stat"))); len(r.Damon) != 0 {
		t.Errorf("a stat scheme was read as reclaim: %+v", r.Damon)
	}
	// A memcg filter decides what no reading of the files can.
	r := ReadReclaim(tree(t, damonScheme("on", "pageout", [3]string{"memcg", "Y", "N"})))
	if _, known := r.Damon[0].Acts(MemMapped); known || !strings.Contains(r.Findings()[0], "may take mapped weights") {
		t.Errorf("a memcg filter: findings %q", r.Findings())
	}
}

func TestReadReclaimSwapCgroupLRU(t *testing.T) {
	r := ReadReclaim(tree(t, map[string]string{
		"proc/swaps":                                             "Filename\tType\tSize\tUsed\tPriority\n/dev/zram0 partition 4194300 0 100\n/swapfile file 1048576 512 -2",
		"proc/sys/vm/swappiness":                                 "100",
		"sys/module/zswap/parameters/enabled":                    "Y",
		"sys/kernel/mm/lru_gen/enabled":                          "0x0007",
		"sys/kernel/mm/lru_gen/min_ttl_ms":                       "1000",
		"proc/self/cgroup":                                       "0::/user.slice/braid.service",
		"sys/fs/cgroup/user.slice/braid.service/memory.max":      "17179869184",
		"sys/fs/cgroup/user.slice/braid.service/memory.high":     "12884901888",
		"sys/fs/cgroup/user.slice/braid.service/memory.swap.max": "max",
	}))
	if len(r.Swap) != 2 || r.SwapTotal() != (4194300+1048576)<<10 || r.Swap[1].Used != 512<<10 || r.Swappiness != 100 || !r.Zswap {
		t.Errorf("swap read as %+v, swappiness %d, zswap %v", r.Swap, r.Swappiness, r.Zswap)
	}
	if r.MGLRU != "0x0007" || r.MinTTL != time.Second {
		t.Errorf("MGLRU %q min_ttl %v", r.MGLRU, r.MinTTL)
	}
	c := r.Cgroup
	if c.Version != 2 || c.Path != "/user.slice/braid.service" || c.Max != 16<<30 || c.High != 12<<30 || c.SwapMax != 0 || c.SwapMaxSet {
		t.Errorf("cgroup read as %+v", c)
	}
	all := strings.Join(r.Findings(), "\n")
	for _, want := range []string{"swap: 5.00 GiB, swappiness 100, zswap on", "memory.high 12.00 GiB", "memory limit 16.00 GiB", "min_ttl_ms 1000"} {
		if !strings.Contains(all, want) {
			t.Errorf("findings lack %q:\n%s", want, all)
		}
	}
	// memory.swap.max 0 forbids this cgroup swap: the node's swap does
	// not reach braid's memory.
	r = ReadReclaim(tree(t, map[string]string{
		"proc/swaps":                      "Filename\tType\tSize\tUsed\tPriority\n/swapfile file 1048576 0 -2",
		"proc/self/cgroup":                "0::/a",
		"sys/fs/cgroup/a/memory.max":      "max",
		"sys/fs/cgroup/a/memory.swap.max": "0",
	}))
	if !r.Cgroup.SwapMaxSet || r.Cgroup.Max != 0 || strings.Contains(strings.Join(r.Findings(), "\n"), "swap:") {
		t.Errorf("swap.max 0: cgroup %+v, findings %q", r.Cgroup, r.Findings())
	}
}

// TestReadReclaimV1 reads a cgroup v1 memory controller: the unlimited
// sentinel is no limit, a soft limit is the reclaim threshold.
func TestReadReclaimV1(t *testing.T) {
	r := ReadReclaim(tree(t, map[string]string{
		"proc/self/cgroup": "9:name=systemd:/\n4:memory:/process_api/abc\n0::/",
		"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes":      "9223372036854771712",
		"sys/fs/cgroup/memory/process_api/abc/memory.soft_limit_in_bytes": "8589934592",
	}))
	if c := r.Cgroup; c.Version != 1 || c.Path != "/process_api/abc" || c.Max != 0 || c.High != 8<<30 {
		t.Errorf("v1 cgroup read as %+v", c)
	}
}

// TestReadReclaimEmpty: a tree with nothing readable reports nothing.
func TestReadReclaimEmpty(t *testing.T) {
	r := ReadReclaim(t.TempDir())
	if len(r.Damon) != 0 || len(r.Swap) != 0 || r.Swappiness != -1 || r.Cgroup.Version != 0 || len(r.Findings()) != 0 {
		t.Errorf("an empty tree: %+v, findings %q", r, r.Findings())
	}
}
