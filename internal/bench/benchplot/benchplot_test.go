package benchplot

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"braid/internal/bench"
)

// TestWrite draws a report of made-up requests (and one of no successful
// request, whose panels say so) and decodes the PNG back.
func TestWrite(t *testing.T) {
	r := &bench.ServeReport{Duration: 2 * time.Second, Completed: 20, DurationS: 2}
	for i := range 20 {
		d := time.Duration(i+1) * time.Millisecond
		r.Results = append(r.Results, bench.RequestResult{OK: true, PromptTokens: 8, OutputTokens: 6,
			Start: time.Duration(i) * 90 * time.Millisecond, TTFT: 10 * d, E2E: 10*d + 50*time.Millisecond,
			ITL: []time.Duration{d, 2 * d, d, 3 * d, d}})
	}
	r.TTFT = bench.Dist{Median: 105, P99: 200, N: 20}
	failed := &bench.ServeReport{Duration: time.Second, Failed: 1, Results: []bench.RequestResult{{Error: "refused"}}}
	for name, rep := range map[string]*bench.ServeReport{"run": r, "failed": failed} {
		path := filepath.Join(t.TempDir(), name+".png")
		if err := Write(rep, path); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() < 500 || img.Bounds().Dy() < 500 {
			t.Fatalf("%s: not a usable PNG: %v", name, err)
		}
	}
}
