// Package benchplot draws a `braid bench serve` report as a PNG. It is its
// own package, imported only by the bench command, so that the plotting
// library and its font, PDF and image stack stay out of every other
// package's dependencies (the worker's and the server's among them).
package benchplot

import (
	"fmt"
	"image/color"
	"os"
	"time"

	"braid/internal/bench"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Write writes a PNG with the report's latency distributions (TTFT, TPOT,
// ITL, E2E) and its output throughput over the run, one panel each.
func Write(r *bench.ServeReport, path string) error {
	var ttft, tpot, itl, e2e []time.Duration
	for _, x := range r.Results {
		if !x.OK {
			continue
		}
		ttft = append(ttft, x.TTFT)
		e2e = append(e2e, x.E2E)
		itl = append(itl, x.ITL...)
		if x.OutputTokens > 1 {
			tpot = append(tpot, (x.E2E-x.TTFT)/time.Duration(x.OutputTokens-1))
		}
	}
	var panels []*plot.Plot
	for _, h := range []struct {
		name string
		d    []time.Duration
		dist bench.Dist
	}{{"Time to first token", ttft, r.TTFT}, {"Time per output token", tpot, r.TPOT}, {"Inter-token latency", itl, r.ITL}, {"End-to-end latency", e2e, r.E2E}} {
		p, err := histogram(h.name, h.d, h.dist)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	tp, err := throughputPlot(r)
	if err != nil {
		return err
	}
	panels = append(panels, tp, summaryPlot(r))

	const cols, rows = 2, 3
	img := vgimg.New(vg.Points(900), vg.Points(1000))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = panels[i*cols : (i+1)*cols]
	}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j := range grid[i] {
			grid[i][j].Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

func histogram(title string, ds []time.Duration, d bench.Dist) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "ms"
	p.Y.Label.Text = "count"
	if len(ds) == 0 {
		p.Title.Text += " (no data)"
		return p, nil
	}
	v := make(plotter.Values, len(ds))
	for i, d := range ds {
		v[i] = float64(d) / float64(time.Millisecond)
	}
	bins := min(40, max(5, len(v)/5))
	h, err := plotter.NewHist(v, bins)
	if err != nil {
		return nil, fmt.Errorf("plotting %s: %w", title, err)
	}
	h.FillColor = color.RGBA{R: 70, G: 120, B: 200, A: 255}
	p.Add(h)
	p.Legend.Add(fmt.Sprintf("median %.1f ms, p99 %.1f ms", d.Median, d.P99))
	p.Legend.Top = true
	return p, nil
}

// throughputPlot is generated tokens per second over the run, in 50 equal
// time buckets, each request's tokens spread evenly from its first to its
// last.
func throughputPlot(r *bench.ServeReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Output throughput"
	p.X.Label.Text = "s since start"
	p.Y.Label.Text = "tokens/s"
	const n = 50
	width := max(r.Duration.Seconds(), 1e-3) / n
	buckets := make([]float64, n)
	for _, x := range r.Results {
		if !x.OK || x.OutputTokens == 0 {
			continue
		}
		first := (x.Start + x.TTFT).Seconds()
		last := (x.Start + x.E2E).Seconds()
		for k := range x.OutputTokens {
			t := first
			if x.OutputTokens > 1 {
				t += (last - first) * float64(k) / float64(x.OutputTokens-1)
			}
			if i := int(t / width); i >= 0 && i < n {
				buckets[i]++
			}
		}
	}
	pts := make(plotter.XYs, n)
	for i, b := range buckets {
		pts[i] = plotter.XY{X: (float64(i) + 0.5) * width, Y: b / width}
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return nil, err
	}
	l.Color = color.RGBA{R: 200, G: 80, B: 40, A: 255}
	p.Add(l)
	return p, nil
}

// summaryPlot is an empty panel whose legend holds the headline figures.
func summaryPlot(r *bench.ServeReport) *plot.Plot {
	p := plot.New()
	p.Title.Text = "Summary"
	p.HideAxes()
	for _, s := range []string{
		fmt.Sprintf("%d ok, %d failed in %.1f s", r.Completed, r.Failed, r.DurationS),
		fmt.Sprintf("concurrency %d", r.Config.Concurrency),
		fmt.Sprintf("%.2f req/s", r.RequestTPS),
		fmt.Sprintf("%.1f output tok/s", r.OutputTPS),
		fmt.Sprintf("%.1f total tok/s", r.TotalTPS),
		fmt.Sprintf("median TTFT %.1f ms", r.TTFT.Median),
		fmt.Sprintf("median TPOT %.1f ms", r.TPOT.Median),
	} {
		p.Legend.Add(s)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return p
}
