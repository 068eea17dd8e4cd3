package perfmodel

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/internal/quant"
)

func TestParseNodes(t *testing.T) {
	ns, err := ParseNodes(`3x"gb10:100GiB,273GB/s,link=14GB/s@20us";2xcpu:64GiB,40GB/s,link=1.2GB/s@60us`, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 5 {
		t.Fatalf("%d nodes, want 5", len(ns))
	}
	g, c := ns[0], ns[4]
	if g.Name != "gb10" || g.Mem != 100<<30 || g.BW != 273e9 || g.Link.BW != 14e9 || g.Link.Lat != 20*time.Microsecond {
		t.Errorf("gb10 group: %+v", g)
	}
	if c.Name != "cpu" || c.Mem != 64<<30 || c.BW != 40e9 || c.Link.BW != 1.2e9 || c.Link.Lat != 60*time.Microsecond {
		t.Errorf("cpu group: %+v", c)
	}
	// Comma-separated groups, the preset alone, bits per second.
	ns, err = ParseNodes("2xgb10,cpu:8G,10GB/s,link=200Gb/s@5us,eff=0.5,flops=1T", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 3 || ns[0].Mem != GB10.Mem || ns[2].Link.BW != 25e9 || ns[2].DecodeEff != 0.5 || ns[2].FLOPS != 1e12 {
		t.Errorf("got %+v", ns)
	}
	local := Node{Name: "local", Mem: 1 << 30, BW: 1e10, FLOPS: 1e11, DecodeEff: 0.8}
	if ns, err = ParseNodes("local,gb10", &local, ""); err != nil || len(ns) != 2 || ns[0].BW != 1e10 {
		t.Errorf("local,gb10: %v %+v", err, ns)
	}
}

// TestParseNodesRefused: each bad spec is refused naming the field.
func TestParseNodesRefused(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"gb10:12XB", "memory"},
		{"gb10:-5GiB", "memory"},
		{"gb10:273GX/s", "bandwidth"},
		{"gb10:0GB/s", "bandwidth"},
		{"gb10:link=14GB/s", "link"},
		{"gb10:link=14GB/s@soon", "link latency"},
		{"gb10:link=fastGB/s@20us", "link bandwidth"},
		{"dgx:64GiB", "unknown preset"},
		{"0xgb10", "count"},
		{"cpu:64GiB", "bandwidth: not given"},
		{"cpu:40GB/s", "memory: not given"},
		{"gb10:eff=2", "eff"},
		{"gb10:speed=3", "unknown"},
		{"local", "not calibrated"},
		{"", "empty"},
		{"gb10,,gb10", "empty field"},
	} {
		_, err := ParseNodes(tc.spec, nil, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %q", tc.spec, err, tc.want)
		}
	}
}

func FuzzParseNodes(f *testing.F) {
	for _, s := range []string{"3xgb10", `3x"gb10:121GiB,273GB/s,link=14GB/s@20us"`, "2xcpu:64GiB,40GB/s;gb10", "cpu:1G,1B/s,flops=1", "0xgb10", "x:,;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, err := ParseNodes(s, nil, "")
		if err != nil {
			return
		}
		for _, n := range ns {
			if n.Mem <= 0 || !(n.BW > 0) || !(n.FLOPS > 0) || math.IsInf(n.BW, 0) || n.Link.BW <= 0 {
				t.Fatalf("%q: accepted a node with %+v", s, n)
			}
		}
	})
}

// TestCalibrateCache: a short calibration gives positive rates for every
// format, the batched rate above the streaming one for a compute-light
// format, and round-trips through the cache; a cache from another build
// or thread count is refused as stale.
func TestCalibrateCache(t *testing.T) {
	c, err := Calibrate(1, []quant.Type{quant.Q4_K, quant.Q2_K}, 8, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"Q4_K", "Q2_K"} {
		if len(c.Stream[f]) != 1 || c.Stream[f][0] <= 0 || c.Flops[f][0] <= 0 {
			t.Errorf("%s: stream %v flops %v", f, c.Stream[f], c.Flops[f])
		}
	}
	if c.MemBW <= 0 || c.DecodeEff() <= 0 {
		t.Errorf("mem %g, eff %g", c.MemBW, c.DecodeEff())
	}
	path := filepath.Join(t.TempDir(), "cal.json")
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path, c.Build, 1)
	if err != nil || got.MemBW != c.MemBW {
		t.Fatalf("load: %v", err)
	}
	if _, err := Load(path, "other build", 1); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Errorf("another build: %v", err)
	}
	if _, err := Load(path, c.Build, 2); err == nil || !strings.Contains(err.Error(), "threads") {
		t.Errorf("other threads: %v", err)
	}
	os.WriteFile(path, []byte("{"), 0o644)
	if _, err := Load(path, c.Build, 1); err == nil {
		t.Error("a broken cache was read")
	}
	n := c.Node(1<<30, 1)
	if r := n.StreamRate("Q4_K", 1); r != c.Stream["Q4_K"][0] {
		t.Errorf("local Q4_K rate %g, measured %g", r, c.Stream["Q4_K"][0])
	}
}

func TestParseNetbench(t *testing.T) {
	rep := `{"pairs":[{"p50_ns":19000,"gbps":1.4},{"p50_ns":25000,"gbps":2}],
	  "allreduce":[{"bytes":2048,"algo":"oneshot","time_ns":40000},{"bytes":1024,"algo":"oneshot","time_ns":32000},{"bytes":1024,"algo":"ring","time_ns":90000}]}`
	l, err := ParseNetbench([]byte(rep))
	if err != nil {
		t.Fatal(err)
	}
	if l.Lat != 25*time.Microsecond || l.BW != 1.4e9 || l.AR != 32*time.Microsecond {
		t.Errorf("got %+v, want the slowest pair's 25us and 1.4 GB/s, the 1 KiB one-shot's 32us", l)
	}
	for _, bad := range []string{`{`, `{"pairs":[]}`, `{"pairs":[{"p50_ns":0,"gbps":1}]}`, `{"pairs":[{"p50_ns":100,"gbps":-1}]}`} {
		if _, err := ParseNetbench([]byte(bad)); err == nil || !strings.Contains(err.Error(), "netbench report") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func FuzzParseNetbench(f *testing.F) {
	f.Add([]byte(`{"pairs":[{"p50_ns":19000,"gbps":1.4}],"allreduce":[{"bytes":1024,"algo":"oneshot","time_ns":32000}]}`))
	f.Add([]byte(`{"pairs":[{"p50_ns":-1,"gbps":1e309}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseNetbench(b)
		if err == nil && (l.Lat <= 0 || !(l.BW > 0) || math.IsInf(l.BW, 0) || l.AR < 0) {
			t.Fatalf("accepted %+v from %q", l, b)
		}
	})
}
