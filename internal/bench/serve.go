// Package bench measures braid and other servers: the online load generator
// behind `braid bench serve` and its reports (package benchplot draws them).
package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// ServeConfig describes one load-generator run against an OpenAI-compatible
// server.
type ServeConfig struct {
	URL    string // server base URL, e.g. http://127.0.0.1:8080
	Model  string
	APIKey string
	// Endpoint is "completions" (/v1/completions, the default, as vLLM's
	// bench uses) or "chat" (/v1/chat/completions).
	Endpoint    string
	NumPrompts  int
	InputLen    int // prompt tokens wanted (random prompts)
	OutputLen   int // tokens generated per request (ignore_eos is sent)
	Concurrency int // most requests in flight; 0 = no bound
	// RequestRate is requests per second with Poisson arrivals; 0 or +Inf
	// sends them all at once (bounded by Concurrency).
	RequestRate float64
	Seed        uint64
	// Dataset is a JSONL file of {"prompt": "...", "output_len": N} lines
	// used instead of random prompts (output_len optional).
	Dataset string
	Timeout time.Duration // per request; 0 = 10 minutes
	// Duration, when set, stops sending new requests after this long (a
	// soak run); NumPrompts stays the upper bound. Requests in flight finish.
	Duration time.Duration
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Constrain are request fields sent with a share of the requests
	// (response_format, tools, tool_choice, grammar, json_schema): the
	// constrained requests. ConstrainFraction is that share, spread
	// evenly over the run (0 with fields set means all).
	Constrain         map[string]json.RawMessage
	ConstrainFraction float64
}

// constrained says whether request i of the run carries the Constrain
// fields: a fraction f of them, evenly spread (i+1)*f crossing an integer.
func (c *ServeConfig) constrained(i int) bool {
	if len(c.Constrain) == 0 {
		return false
	}
	f := c.ConstrainFraction
	if f <= 0 || f >= 1 {
		return true
	}
	return math.Floor(float64(i+1)*f) > math.Floor(float64(i)*f)
}

// RequestResult is one request's measurements.
type RequestResult struct {
	OK          bool `json:"ok"`
	Constrained bool `json:"constrained,omitempty"`
	// ToolCalls counts the tool calls of the reply.
	ToolCalls    int             `json:"tool_calls,omitempty"`
	Error        string          `json:"error,omitempty"`
	PromptTokens int             `json:"prompt_tokens"`
	OutputTokens int             `json:"output_tokens"`
	Start        time.Duration   `json:"start_ns"` // since the run began
	TTFT         time.Duration   `json:"ttft_ns"`
	E2E          time.Duration   `json:"e2e_ns"`
	ITL          []time.Duration `json:"itl_ns"`
}

type prompt struct {
	text   string
	outLen int
}

// wordList builds random prompts; common words are about one token each in
// byte-level BPE vocabularies, and the calibration request corrects for the
// rest.
var wordList = strings.Fields(`the of and to in is was he for it with as his on be at by had are but from
or have an they which one you were her all she there would their we him been has when who will more no if out
so said what up its about into than them can only other new some could time these two may then do first any my
now such like our over man me even most made after also did many before must through back years where much your
way well down should because each just those people how too little state good very make world still own see men
work long get here between both life being under never day same another know while last might us great old year
off come since against go came right used take three story cat dog garden river morning light small house tree`)

// RunServe drives the server and returns every request's result. It fails
// only when the server cannot be used at all (calibration fails).
func RunServe(ctx context.Context, cfg ServeConfig) (*ServeReport, error) {
	if cfg.URL == "" || cfg.Model == "" {
		return nil, errors.New("bench serve: --url and --model are required")
	}
	if cfg.NumPrompts <= 0 {
		return nil, fmt.Errorf("bench serve: --num-prompts %d: need at least 1", cfg.NumPrompts)
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "completions"
	}
	if cfg.Endpoint != "completions" && cfg.Endpoint != "chat" {
		return nil, fmt.Errorf("bench serve: --endpoint %q: want completions or chat", cfg.Endpoint)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.ConstrainFraction < 0 || cfg.ConstrainFraction > 1 {
		return nil, fmt.Errorf("bench serve: --constrained-fraction %g: want a share in [0, 1]", cfg.ConstrainFraction)
	}
	for k := range cfg.Constrain {
		switch k {
		case "tools", "tool_choice", "response_format", "grammar", "json_schema", "parallel_tool_calls":
		default:
			return nil, fmt.Errorf("bench serve: %q is not a constraint field (tools, tool_choice, parallel_tool_calls, response_format, grammar, json_schema)", k)
		}
		if _, chat := cfg.Constrain["tools"]; chat && cfg.Endpoint != "chat" {
			return nil, errors.New("bench serve: tools need --endpoint chat")
		}
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: max(cfg.Concurrency, 64)}}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x62726169640a))
	var prompts []prompt
	var err error
	if cfg.Dataset != "" {
		prompts, err = loadDataset(cfg.Dataset, cfg.NumPrompts, cfg.OutputLen)
	} else {
		if cfg.InputLen <= 0 || cfg.OutputLen <= 0 {
			return nil, fmt.Errorf("bench serve: --input-len %d and --output-len %d must be positive", cfg.InputLen, cfg.OutputLen)
		}
		prompts, err = randomPrompts(ctx, client, cfg, rng)
	}
	if err != nil {
		return nil, err
	}
	rep := &ServeReport{Config: cfg, Results: make([]RequestResult, len(prompts))}
	var sem chan struct{}
	if cfg.Concurrency > 0 {
		sem = make(chan struct{}, cfg.Concurrency)
	}
	var wg sync.WaitGroup
	start := time.Now()
	next := start
	for i, p := range prompts {
		if cfg.RequestRate > 0 && !math.IsInf(cfg.RequestRate, 1) && i > 0 {
			next = next.Add(time.Duration(rng.ExpFloat64() / cfg.RequestRate * float64(time.Second)))
			select {
			case <-time.After(time.Until(next)):
			case <-ctx.Done():
			}
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil || (cfg.Duration > 0 && time.Since(start) > cfg.Duration) {
			rep.Results = rep.Results[:i]
			break
		}
		wg.Add(1)
		// A request starts on the timeline when it is issued here, in
		// order: two issued microseconds apart (an exponential gap can be
		// that short) could otherwise swap places as their goroutines
		// begin.
		issued := time.Since(start)
		go func() {
			defer wg.Done()
			if sem != nil {
				defer func() { <-sem }()
			}
			r := doRequest(ctx, client, cfg, p, cfg.constrained(i), start)
			r.Start = issued
			rep.Results[i] = r
		}()
	}
	wg.Wait()
	rep.Duration = time.Since(start)
	rep.summarize()
	return rep, ctx.Err()
}

// randomPrompts makes prompts of random words, sized from one calibration
// request: the server's own token count for a known word count.
func randomPrompts(ctx context.Context, client *http.Client, cfg ServeConfig, rng *rand.Rand) ([]prompt, error) {
	words := func(n int) string {
		var sb strings.Builder
		for i := range n {
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(wordList[rng.IntN(len(wordList))])
		}
		return sb.String()
	}
	// The prompts draw words uniformly from wordList, so the mean tokens
	// per word is that of the whole list: sent in chunks, the first one
	// also twice over, which gives the tokens every request has besides
	// its words (BOS, and on the chat endpoint the template's role
	// markers); --input-len counts those too.
	calib := ServeConfig{URL: cfg.URL, Model: cfg.Model, APIKey: cfg.APIKey, Endpoint: cfg.Endpoint, Timeout: cfg.Timeout}
	count := func(text string) (int, error) {
		r := doRequest(ctx, client, calib, prompt{text: text, outLen: 1}, false, time.Now())
		if !r.OK {
			return 0, fmt.Errorf("bench serve: calibration request to %s failed: %s", cfg.URL, r.Error)
		}
		return r.PromptTokens, nil
	}
	// Each calibration request must fit the server's context: chunks of
	// up to 48 words, fewer where the context is small (the first chunk
	// is also sent twice over, and a word may take a token per byte).
	ctxLen := serverContext(ctx, client, cfg)
	chunk := 48
	if ctxLen > 0 {
		base, err := count(wordList[0])
		if err != nil {
			return nil, err
		}
		worst := 1
		for _, w := range wordList {
			worst = max(worst, len(w)+1)
		}
		chunk = min(chunk, max(1, (ctxLen-1-base)/(2*worst)))
		if need := cfg.InputLen + cfg.OutputLen; need > ctxLen {
			return nil, fmt.Errorf("bench serve: --input-len %d plus --output-len %d is %d tokens, more than the server's context of %d", cfg.InputLen, cfg.OutputLen, need, ctxLen)
		}
	}
	var parts []string
	for lo := 0; lo < len(wordList); lo += chunk {
		parts = append(parts, strings.Join(wordList[lo:min(lo+chunk, len(wordList))], " "))
	}
	one, err := count(parts[0])
	if err != nil {
		return nil, err
	}
	two, err := count(parts[0] + " " + parts[0])
	if err != nil {
		return nil, err
	}
	fixed := max(0, 2*one-two)
	listTokens := two - one
	for _, p := range parts[1:] {
		n, err := count(p)
		if err != nil {
			return nil, err
		}
		listTokens += n - fixed
	}
	perWord := max(float64(listTokens)/float64(len(wordList)), 0.1)
	n := max(1, int(math.Round(float64(cfg.InputLen-fixed)/perWord)))
	if float64(cfg.InputLen-fixed) < perWord {
		fmt.Fprintf(cfg.Log, "warning: every request takes %d prompt tokens besides its words (BOS, the chat template's markers), as many as --input-len %d or more: the prompts are one word, about %d tokens\n",
			fixed, cfg.InputLen, fixed+int(math.Ceil(perWord)))
	}
	fmt.Fprintf(cfg.Log, "calibration: %.2f prompt tokens per word on the server and %d besides them; using %d words for %d tokens\n",
		perWord, fixed, n, cfg.InputLen)
	out := make([]prompt, cfg.NumPrompts)
	for i := range out {
		out[i] = prompt{text: words(n), outLen: cfg.OutputLen}
	}
	return out, nil
}

func loadDataset(path string, n, outLen int) ([]prompt, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench serve: --dataset: %w", err)
	}
	var out []prompt
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec struct {
			Prompt    string `json:"prompt"`
			OutputLen int    `json:"output_len"`
		}
		if err := json.Unmarshal(line, &rec); err != nil || rec.Prompt == "" {
			return nil, fmt.Errorf("bench serve: %s:%d: want {\"prompt\": \"...\", \"output_len\": N}: %v", path, i+1, err)
		}
		if rec.OutputLen <= 0 {
			rec.OutputLen = outLen
		}
		if rec.OutputLen <= 0 {
			rec.OutputLen = 128
		}
		out = append(out, prompt{rec.Prompt, rec.OutputLen})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench serve: %s holds no prompt", path)
	}
	// Cycle through the file when it holds fewer prompts than asked for.
	for i, have := 0, len(out); len(out) < n; i++ {
		out = append(out, out[i%have])
	}
	return out[:n], nil
}

// serverContext asks the server its context length: llama-server's and
// braid's /props (default_generation_settings.n_ctx), else vLLM's
// /v1/models (max_model_len); 0 when neither says.
func serverContext(ctx context.Context, client *http.Client, cfg ServeConfig) int {
	get := func(path string, v any) bool {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", cfg.URL+path, nil)
		if err != nil {
			return false
		}
		if cfg.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v) == nil
	}
	var props struct {
		Settings struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if get("/props", &props) && props.Settings.NCtx > 0 {
		return props.Settings.NCtx
	}
	var models struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if get("/v1/models", &models) {
		for _, m := range models.Data {
			if m.MaxModelLen > 0 && (m.ID == cfg.Model || len(models.Data) == 1) {
				return m.MaxModelLen
			}
		}
	}
	return 0
}

// doRequest sends one streaming request and times its tokens; Start is
// from runStart.
func doRequest(ctx context.Context, client *http.Client, cfg ServeConfig, p prompt, constrained bool, runStart time.Time) RequestResult {
	res := RequestResult{Constrained: constrained}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	body := map[string]any{
		"model": cfg.Model, "max_tokens": p.outLen, "stream": true, "temperature": 0,
		"ignore_eos": true, "stream_options": map[string]any{"include_usage": true},
	}
	if constrained {
		for k, v := range cfg.Constrain {
			body[k] = v
		}
	}
	path := "/v1/completions"
	if cfg.Endpoint == "chat" {
		path = "/v1/chat/completions"
		body["messages"] = []map[string]string{{"role": "user", "content": p.text}}
	} else {
		body["prompt"] = p.text
	}
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", cfg.URL+path, bytes.NewReader(data))
	if err != nil {
		res.Error = err.Error()
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	// A server may close an idle keep-alive connection just as a request
	// is sent on it (llama-server does): with an Idempotency-Key, Go's
	// transport retries such a request on a new connection instead of
	// reporting a failure that no server-side error caused. It retries
	// only when nothing of the request reached the server.
	req.Header.Set("Idempotency-Key", fmt.Sprintf("braid-bench-%p-%d", req, time.Now().UnixNano()))
	if cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	t0 := time.Now()
	// (t0.Sub(time.Time{}) saturates at 292 years: every start was 0.)
	res.Start = t0.Sub(runStart)
	resp, err := client.Do(req)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		res.Error = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		return res
	}
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	var last time.Time
	chunks, done := 0, false
	for {
		line, err := rd.ReadBytes('\n')
		if len(line) > 0 {
			payload, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:"))
			if ok {
				payload = bytes.TrimSpace(payload)
				if string(payload) == "[DONE]" {
					done = true
					break
				}
				var ev struct {
					Choices []struct {
						Text  string `json:"text"`
						Delta struct {
							Content          string `json:"content"`
							ReasoningContent string `json:"reasoning_content"`
							ToolCalls        []struct {
								ID string `json:"id"`
							} `json:"tool_calls"`
						} `json:"delta"`
					} `json:"choices"`
					Usage *struct {
						PromptTokens     int `json:"prompt_tokens"`
						CompletionTokens int `json:"completion_tokens"`
					} `json:"usage"`
					Error *struct {
						Message string `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal(payload, &ev); err != nil {
					res.Error = fmt.Sprintf("bad SSE event %.200q: %v", payload, err)
					return res
				}
				if ev.Error != nil {
					res.Error = "server error mid-stream: " + ev.Error.Message
					return res
				}
				now := time.Now()
				for _, c := range ev.Choices {
					for _, tc := range c.Delta.ToolCalls {
						if tc.ID != "" {
							res.ToolCalls++
						}
					}
					if c.Text == "" && c.Delta.Content == "" && c.Delta.ReasoningContent == "" && len(c.Delta.ToolCalls) == 0 {
						continue
					}
					if chunks == 0 {
						res.TTFT = now.Sub(t0)
					} else {
						res.ITL = append(res.ITL, now.Sub(last))
					}
					last = now
					chunks++
				}
				if ev.Usage != nil {
					res.PromptTokens, res.OutputTokens = ev.Usage.PromptTokens, ev.Usage.CompletionTokens
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				res.Error = err.Error()
				return res
			}
			break
		}
	}
	res.E2E = time.Since(t0)
	if !done {
		res.Error = "stream ended without data: [DONE]"
		return res
	}
	if res.OutputTokens == 0 {
		// A server that reports no usage: one chunk per token is the
		// best guess (true of braid, llama-server and vLLM).
		res.OutputTokens = chunks
	}
	if chunks == 0 && p.outLen > 1 {
		res.Error = "no tokens received"
		return res
	}
	res.OK = true
	return res
}
