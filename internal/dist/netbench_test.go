package dist

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestNetbench(t *testing.T) {
	for _, kind := range []string{"inproc", "tcp"} {
		t.Run(kind, func(t *testing.T) {
			const n = 3
			ts := group(t, kind, n, 10*time.Second)
			cfg := NetbenchConfig{PingIters: 50, BWBytes: 1 << 16, BWIters: 4, MinBytes: 1 << 10, MaxBytes: 1 << 14, SweepBudget: 1 << 16}
			reps := make([]*NetbenchReport, n)
			noErrors(t, onAll(n, func(r int) error {
				var err error
				reps[r], err = Netbench(context.Background(), NewComm(ts[r]), cfg)
				return err
			}))
			rep := reps[0]
			if rep == nil || reps[1] != nil || reps[2] != nil {
				t.Fatalf("reports: %v", reps)
			}
			if len(rep.Pairs) != 3 || len(rep.Sweep) != 5*3 || rep.Ranks != 3 || rep.Transport != kind {
				t.Fatalf("report: %+v", rep)
			}
			for _, p := range rep.Pairs {
				if p.P50 <= 0 || p.P99 < p.P50 || p.GBps <= 0 || p.Addr == "" {
					t.Fatalf("pair %+v", p)
				}
			}
			for _, s := range rep.Sweep {
				if s.Time <= 0 || s.AlgBW <= 0 || math.Abs(s.BusBW-s.AlgBW*4/3) > 1e-9*s.BusBW {
					t.Fatalf("sweep %+v", s)
				}
			}
			var tab bytes.Buffer
			rep.WriteTable(&tab)
			if !strings.Contains(tab.String(), "busbw") || !strings.Contains(tab.String(), "0-2") {
				t.Fatalf("table:\n%s", tab.String())
			}
			js, err := rep.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var back map[string]any
			if err := json.Unmarshal(js, &back); err != nil || back["ranks"].(float64) != 3 {
				t.Fatalf("json %s: %v", js, err)
			}
			t.Logf("\n%s", tab.String())
		})
	}
}

func TestCrossover(t *testing.T) {
	mk := func(b int, a Algo, us int) SweepResult {
		return SweepResult{Bytes: b, Algo: a, Time: time.Duration(us) * time.Microsecond}
	}
	// One-shot wins small sizes; a noisy point at 4 (ring) and at 16
	// (one-shot) must not move the threshold; above 8 ring wins.
	sw := []SweepResult{mk(1, OneShot, 1), mk(1, Ring, 5), mk(2, OneShot, 2), mk(2, Ring, 3), mk(4, OneShot, 5), mk(4, Ring, 4),
		mk(8, OneShot, 6), mk(8, Ring, 9), mk(16, OneShot, 20), mk(16, Ring, 40), mk(32, OneShot, 90), mk(32, Ring, 30),
		mk(64, OneShot, 200), mk(64, Ring, 60), mk(128, OneShot, 400), mk(128, Ring, 120)}
	if got, large := crossover(sw); got != 16 || large != Ring {
		t.Fatalf("crossover %d %s, want 16 ring", got, large)
	}
}
