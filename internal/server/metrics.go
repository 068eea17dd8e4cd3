package server

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	"braid/internal/engine"
)

// histogram is a Prometheus histogram with fixed buckets (seconds).
type histogram struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative; last is +Inf
	sum    float64
	n      uint64
}

func newHistogram(bounds ...float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.counts[i]++
	h.sum += v
	h.n++
}

func (h *histogram) write(w io.Writer, name string) {
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%s\"} %d\n", name, strconv.FormatFloat(b, 'g', -1, 64), cum)
	}
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", name, h.n, name, h.sum, name, h.n)
}

// metrics are the server's own counters; the engine's are read from the
// scheduler when scraped.
type metrics struct {
	mu       sync.Mutex
	requests map[[2]string]uint64 // endpoint, status
	ttft     *histogram
	itl      *histogram
	e2e      *histogram
	// For llama-server's names: time spent reading prompts (admission to
	// first token) and generating (first to last token), summed over the
	// finished requests, and the longest sequence seen.
	promptSecs, genSecs float64
	promptN, genN       int64
	tokensMax           int
}

// finished records one request's prompt and generation times and its
// length (prompt plus generated tokens), for the llamacpp: series.
func (m *metrics) finished(promptN int, promptSecs float64, genN int, genSecs float64, length int) {
	m.mu.Lock()
	m.promptSecs += promptSecs
	m.genSecs += genSecs
	m.promptN += int64(promptN)
	m.genN += int64(genN)
	m.tokensMax = max(m.tokensMax, length)
	m.mu.Unlock()
}

func newMetrics() *metrics {
	return &metrics{
		requests: map[[2]string]uint64{},
		ttft:     newHistogram(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
		itl:      newHistogram(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
		e2e:      newHistogram(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
	}
}

func (m *metrics) request(endpoint string, status int) {
	m.mu.Lock()
	m.requests[[2]string{endpoint, strconv.Itoa(status)}]++
	m.mu.Unlock()
}

func (m *metrics) observeTTFT(d time.Duration) {
	m.mu.Lock()
	m.ttft.observe(d.Seconds())
	m.mu.Unlock()
}

// observeITL records the gaps between consecutive tokens of one request.
func (m *metrics) observeITL(gaps []time.Duration) {
	if len(gaps) == 0 {
		return
	}
	m.mu.Lock()
	for _, g := range gaps {
		m.itl.observe(g.Seconds())
	}
	m.mu.Unlock()
}

func (m *metrics) observeE2E(d time.Duration) {
	m.mu.Lock()
	m.e2e.observe(d.Seconds())
	m.mu.Unlock()
}

// write renders every metric in the Prometheus text format.
func (m *metrics) write(w io.Writer, ready bool, sched *engine.Scheduler, ranks engine.Ranked) {
	m.mu.Lock()
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	fmt.Fprintln(w, "# HELP braid_requests_total HTTP requests by endpoint and status.\n# TYPE braid_requests_total counter")
	for _, k := range keys {
		fmt.Fprintf(w, "braid_requests_total{endpoint=%q,status=%q} %d\n", k[0], k[1], m.requests[k])
	}
	fmt.Fprintln(w, "# HELP braid_time_to_first_token_seconds From request arrival to the first generated token.\n# TYPE braid_time_to_first_token_seconds histogram")
	m.ttft.write(w, "braid_time_to_first_token_seconds")
	fmt.Fprintln(w, "# HELP braid_inter_token_latency_seconds Gap between consecutive tokens of a request.\n# TYPE braid_inter_token_latency_seconds histogram")
	m.itl.write(w, "braid_inter_token_latency_seconds")
	fmt.Fprintln(w, "# HELP braid_request_duration_seconds From request arrival to its last token.\n# TYPE braid_request_duration_seconds histogram")
	m.e2e.write(w, "braid_request_duration_seconds")
	promptSecs, genSecs, promptN, genN, tokensMax := m.promptSecs, m.genSecs, m.promptN, m.genN, m.tokensMax
	m.mu.Unlock()

	gauge := func(name, help string, v any) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %v\n", name, help, name, name, v)
	}
	counter := func(name, help string, v any) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %v\n", name, help, name, name, v)
	}
	r := 0
	if ready {
		r = 1
	}
	gauge("braid_ready", "1 when the model is loaded and requests are served.", r)
	if sched == nil {
		return
	}
	c := sched.Counters()
	cfg := sched.Config()
	counter("braid_prompt_tokens_total", "Prompt tokens evaluated (reused prefix tokens excluded).", c.PromptTokens)
	counter("braid_prefix_reused_tokens_total", "Prompt tokens taken from cached sequences instead of being evaluated.", c.ReusedTokens)
	counter("braid_generated_tokens_total", "Tokens generated.", c.GenTokens)
	counter("braid_steps_total", "Batched forward steps run.", c.Steps)
	gauge("braid_queue_depth", "Requests waiting for a slot.", c.Queue)
	gauge("braid_busy_slots", "Sequences holding a slot.", c.Busy)
	gauge("braid_slots", "Slots (--parallel).", cfg.Parallel)
	gauge("braid_kv_cache_blocks_used", "KV cache blocks in use, cached finished sequences included.", c.KVBlocksUsed)
	gauge("braid_kv_cache_blocks_total", "KV cache blocks in the pool.", c.KVBlocksTotal)
	ratio := 0.0
	if c.KVBlocksTotal > 0 {
		ratio = float64(c.KVBlocksUsed) / float64(c.KVBlocksTotal)
	}
	gauge("braid_kv_cache_usage_ratio", "Fraction of the KV cache pool in use.", ratio)
	gauge("braid_prefix_cached_sequences", "Finished sequences kept for prefix reuse.", c.CachedSequences)
	gauge("braid_step_decode_sequences_max", "The most sequences decoded together in one step so far.", c.MaxStepSequences)
	gauge("braid_steps_in_flight_max", "The most steps in flight at once (a layer split overlaps the steps of groups of sequences; 0 when steps do not overlap).", c.MaxInFlight)
	counter("braid_steps_overlapped_total", "Steps launched while another was still in flight.", c.OverlappedSteps)
	fmt.Fprintln(w, "# HELP braid_steps_by_decode_sequences_total Steps by the number of sequences they decoded together (0: prefill only).\n# TYPE braid_steps_by_decode_sequences_total counter")
	for k, n := range c.StepSequences {
		fmt.Fprintf(w, "braid_steps_by_decode_sequences_total{sequences=\"%d\"} %d\n", k, n)
	}
	writeSpec(w, sched.SpecStats())
	if ranks != nil {
		writeRanks(w, ranks)
	}
	writeLlama(w, c, sched.SpecStats(), llamaTimes{promptSecs, genSecs, promptN, genN, tokensMax})
}

// llamaTimes are the server's sums behind llama-server's time series.
type llamaTimes struct {
	promptSecs, genSecs float64
	promptN, genN       int64
	tokensMax           int
}

// writeLlama writes llama-server's series under its names (llamacpp:...),
// from the same counts as braid's own, so a dashboard made for
// llama-server reads braid. Its gauges of throughput are averages since
// the start here (llama-server's since its previous scrape).
func writeLlama(w io.Writer, c engine.Counters, spec *engine.SpecStats, t llamaTimes) {
	rate := func(n int64, secs float64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(n) / secs
	}
	var decoding int64
	for k, n := range c.StepSequences {
		decoding += int64(k) * n
	}
	perDecode := 0.0
	if c.Steps > 0 {
		perDecode = float64(decoding) / float64(c.Steps)
	}
	var drafted, accepted, verified int64
	if spec != nil {
		drafted, accepted, verified = spec.DraftedTotal(), spec.AcceptedTotal(), spec.Steps
	}
	for _, s := range []struct {
		name, typ, help string
		v               any
	}{
		{"prompt_tokens_total", "counter", "Number of prompt tokens processed, excluding cached tokens.", c.PromptTokens},
		{"prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache.", c.ReusedTokens},
		{"prompt_seconds_total", "counter", "Total time spent processing prompts.", t.promptSecs},
		{"tokens_predicted_total", "counter", "Number of generation tokens processed.", c.GenTokens},
		{"tokens_predicted_seconds_total", "counter", "Total time spent generating tokens.", t.genSecs},
		{"n_decode_total", "counter", "Total number of batched steps (llama_decode() calls).", c.Steps},
		{"n_tokens_max", "counter", "Largest observed sequence length (prompt + generation).", t.tokensMax},
		{"spec_decode_num_draft_tokens_total", "counter", "Speculative: Total draft tokens generated.", drafted},
		{"spec_decode_num_accepted_tokens_total", "counter", "Speculative: Total draft tokens accepted by the target model.", accepted},
		{"spec_decode_num_drafts_total", "counter", "Speculative: Total speculative decoding verification steps.", verified},
		{"prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", rate(t.promptN, t.promptSecs)},
		{"predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", rate(t.genN, t.genSecs)},
		{"requests_processing", "gauge", "Number of requests processing.", c.Busy},
		{"requests_deferred", "gauge", "Number of requests deferred.", c.Queue},
		{"n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call.", perDecode},
		{"context_shifts_total", "counter", "Context shifts made (--context-shift).", c.ContextShifts},
	} {
		fmt.Fprintf(w, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %v\n", s.name, s.help, s.name, s.typ, s.name, s.v)
	}
}

// writeRanks exports a cluster's per-rank step times (cumulative, so a
// rate over a window is the share of that window) and its data-plane links.
func writeRanks(w io.Writer, ranks engine.Ranked) {
	stats := ranks.RankStats()
	type series struct {
		name, help string
		v          func(engine.RankStats) any
	}
	for _, s := range []series{
		{"braid_rank_steps_total", "Steps run by each rank.", func(r engine.RankStats) any { return r.Steps }},
		{"braid_rank_step_seconds_total", "Time each rank spent in its steps' forward passes, waits included.", func(r engine.RankStats) any { return r.Step.Seconds() }},
		{"braid_rank_allreduce_seconds_total", "Time each rank spent in all-reduces (sending, waiting for its peers, summing).", func(r engine.RankStats) any { return r.AllReduce.Seconds() }},
		{"braid_rank_pipeline_seconds_total", "Time each rank spent receiving from the previous pipeline stage and sending to the next.", func(r engine.RankStats) any { return r.Pipeline.Seconds() }},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", s.name, s.help, s.name)
		for _, r := range stats {
			addr := r.Addr
			if addr == "" {
				addr = "local"
			}
			fmt.Fprintf(w, "%s{rank=\"%d\",addr=%q} %v\n", s.name, r.Rank, addr, s.v(r))
		}
	}
	fmt.Fprintln(w, "# HELP braid_cluster_link_info A data-plane connection: rank reaches peer at addr over transport.\n# TYPE braid_cluster_link_info gauge")
	for _, l := range ranks.Links() {
		fmt.Fprintf(w, "braid_cluster_link_info{rank=\"%d\",peer=\"%d\",addr=%q,transport=%q} 1\n", l.From, l.To, l.Addr, l.Transport)
	}
}
