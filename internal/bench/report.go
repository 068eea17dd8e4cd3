package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"time"
)

// Dist summarizes a latency distribution in milliseconds.
type Dist struct {
	Mean   float64 `json:"mean_ms"`
	Median float64 `json:"median_ms"`
	P90    float64 `json:"p90_ms"`
	P99    float64 `json:"p99_ms"`
	Std    float64 `json:"std_ms"`
	N      int     `json:"n"`
}

func newDist(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	v := make([]float64, len(ds))
	sum := 0.0
	for i, d := range ds {
		v[i] = float64(d) / float64(time.Millisecond)
		sum += v[i]
	}
	sort.Float64s(v)
	mean := sum / float64(len(v))
	ss := 0.0
	for _, x := range v {
		ss += (x - mean) * (x - mean)
	}
	return Dist{Mean: mean, Median: quantile(v, 0.5), P90: quantile(v, 0.9), P99: quantile(v, 0.99), Std: math.Sqrt(ss / float64(len(v))), N: len(v)}
}

// quantile interpolates linearly between order statistics (numpy's
// default, which vLLM's report uses).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	lo := int(pos)
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(lo)
	return sorted[lo]*(1-f) + sorted[lo+1]*f
}

// ServeReport is a load-generator run: the per-request results and the
// summary vLLM's `bench serve` prints.
type ServeReport struct {
	Config   ServeConfig     `json:"-"`
	Results  []RequestResult `json:"-"`
	Duration time.Duration   `json:"-"`

	Completed      int      `json:"completed"`
	Failed         int      `json:"failed"`
	DurationS      float64  `json:"duration_s"`
	InputTokens    int      `json:"total_input_tokens"`
	OutputTokens   int      `json:"total_output_tokens"`
	RequestTPS     float64  `json:"request_throughput"`
	OutputTPS      float64  `json:"output_throughput"`
	TotalTPS       float64  `json:"total_token_throughput"`
	MaxConcurrency int      `json:"max_concurrency"`
	TTFT           Dist     `json:"ttft"`
	TPOT           Dist     `json:"tpot"`
	ITL            Dist     `json:"itl"`
	E2E            Dist     `json:"e2e_latency"`
	FirstErrors    []string `json:"errors,omitempty"`
	// Constrained counts the completed requests that carried the
	// constraint fields, ToolCalls the tool calls of all replies; with
	// both kinds in a run, the two halves' TTFT and TPOT apart.
	Constrained int   `json:"constrained_requests,omitempty"`
	ToolCalls   int   `json:"tool_calls,omitempty"`
	TTFTCons    *Dist `json:"ttft_constrained,omitempty"`
	TPOTCons    *Dist `json:"tpot_constrained,omitempty"`
	TTFTFree    *Dist `json:"ttft_free,omitempty"`
	TPOTFree    *Dist `json:"tpot_free,omitempty"`
}

func (r *ServeReport) summarize() {
	var ttft, tpot, itl, e2e []time.Duration
	var part [2][2][]time.Duration // [constrained][ttft, tpot]
	errs := map[string]bool{}
	for _, x := range r.Results {
		if !x.OK {
			r.Failed++
			if len(r.FirstErrors) < 5 && !errs[x.Error] {
				errs[x.Error] = true
				r.FirstErrors = append(r.FirstErrors, x.Error)
			}
			continue
		}
		r.Completed++
		r.InputTokens += x.PromptTokens
		r.OutputTokens += x.OutputTokens
		ttft = append(ttft, x.TTFT)
		e2e = append(e2e, x.E2E)
		itl = append(itl, x.ITL...)
		k := 0
		if x.Constrained {
			k = 1
			r.Constrained++
		}
		r.ToolCalls += x.ToolCalls
		part[k][0] = append(part[k][0], x.TTFT)
		if x.OutputTokens > 1 {
			d := (x.E2E - x.TTFT) / time.Duration(x.OutputTokens-1)
			tpot = append(tpot, d)
			part[k][1] = append(part[k][1], d)
		}
	}
	if r.Constrained > 0 && r.Constrained < r.Completed {
		d := [4]Dist{newDist(part[1][0]), newDist(part[1][1]), newDist(part[0][0]), newDist(part[0][1])}
		r.TTFTCons, r.TPOTCons, r.TTFTFree, r.TPOTFree = &d[0], &d[1], &d[2], &d[3]
	}
	r.DurationS = r.Duration.Seconds()
	if r.DurationS > 0 {
		r.RequestTPS = float64(r.Completed) / r.DurationS
		r.OutputTPS = float64(r.OutputTokens) / r.DurationS
		r.TotalTPS = float64(r.InputTokens+r.OutputTokens) / r.DurationS
	}
	r.MaxConcurrency = r.Config.Concurrency
	r.TTFT, r.TPOT, r.ITL, r.E2E = newDist(ttft), newDist(tpot), newDist(itl), newDist(e2e)
}

// WriteTable prints the summary in the layout of vLLM's `bench serve`.
func (r *ServeReport) WriteTable(w io.Writer) {
	line := func(name string, v any) {
		switch x := v.(type) {
		case float64:
			fmt.Fprintf(w, "%-40s %10.2f\n", name, x)
		default:
			fmt.Fprintf(w, "%-40s %10v\n", name, x)
		}
	}
	rate := "inf"
	if r.Config.RequestRate > 0 && !math.IsInf(r.Config.RequestRate, 1) {
		rate = fmt.Sprint(r.Config.RequestRate)
	}
	fmt.Fprintf(w, "%s\n", center(" Serving Benchmark Result ", '='))
	line("Server:", r.Config.URL)
	line("Model:", r.Config.Model)
	line("Request rate (req/s):", rate)
	line("Max concurrency:", r.Config.Concurrency)
	line("Successful requests:", r.Completed)
	line("Failed requests:", r.Failed)
	line("Benchmark duration (s):", r.DurationS)
	line("Total input tokens:", r.InputTokens)
	line("Total generated tokens:", r.OutputTokens)
	line("Request throughput (req/s):", r.RequestTPS)
	line("Output token throughput (tok/s):", r.OutputTPS)
	line("Total token throughput (tok/s):", r.TotalTPS)
	for _, d := range []struct {
		title, short string
		d            Dist
	}{{"Time to First Token", "TTFT", r.TTFT}, {"Time per Output Token (excl. 1st token)", "TPOT", r.TPOT}, {"Inter-token Latency", "ITL", r.ITL}, {"End-to-end Latency", "E2EL", r.E2E}} {
		fmt.Fprintf(w, "%s\n", center(d.title, '-'))
		line("Mean "+d.short+" (ms):", d.d.Mean)
		line("Median "+d.short+" (ms):", d.d.Median)
		line("P90 "+d.short+" (ms):", d.d.P90)
		line("P99 "+d.short+" (ms):", d.d.P99)
	}
	if r.Constrained > 0 {
		line("Constrained requests:", r.Constrained)
		line("Tool calls:", r.ToolCalls)
	}
	if r.TTFTCons != nil {
		fmt.Fprintf(w, "%s\n", center("Constrained vs free", '-'))
		line("Median TTFT constrained (ms):", r.TTFTCons.Median)
		line("Median TTFT free (ms):", r.TTFTFree.Median)
		line("Median TPOT constrained (ms):", r.TPOTCons.Median)
		line("Median TPOT free (ms):", r.TPOTFree.Median)
	}
	fmt.Fprintf(w, "%s\n", center("", '='))
	for _, e := range r.FirstErrors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
}

func center(s string, fill byte) string {
	const width = 51
	pad := max(width-len(s), 0)
	left := pad / 2
	b := make([]byte, 0, width)
	for range left {
		b = append(b, fill)
	}
	b = append(b, s...)
	for range pad - left {
		b = append(b, fill)
	}
	return string(b)
}

// WriteJSON writes the summary and, per request, the raw timings.
func (r *ServeReport) WriteJSON(w io.Writer) error {
	type cfg struct {
		URL         string `json:"url"`
		Model       string `json:"model"`
		Endpoint    string `json:"endpoint"`
		NumPrompts  int    `json:"num_prompts"`
		InputLen    int    `json:"input_len"`
		OutputLen   int    `json:"output_len"`
		Concurrency int    `json:"concurrency"`
		RequestRate any    `json:"request_rate"` // a number, or "inf"
		Seed        uint64 `json:"seed"`
		Dataset     string `json:"dataset,omitempty"`
	}
	c := r.Config
	var rate any = c.RequestRate
	if math.IsInf(c.RequestRate, 1) || c.RequestRate <= 0 {
		rate = "inf"
	}
	out := struct {
		Config cfg `json:"config"`
		*ServeReport
		Requests []RequestResult `json:"requests"`
	}{cfg{c.URL, c.Model, c.Endpoint, c.NumPrompts, c.InputLen, c.OutputLen, c.Concurrency, rate, c.Seed, c.Dataset}, r, r.Results}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
