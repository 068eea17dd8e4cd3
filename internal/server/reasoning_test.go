package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"braid/internal/chat"
	"braid/internal/engine"
	"braid/internal/kvcache"
	"braid/internal/model"
	"braid/internal/sharedtest"
	"braid/internal/tokenizer"
)

const templateDir = "../../../shared/testdata/templates"

// scriptBackend is an engine.Backend whose "model" writes a fixed token
// script: every sequence's n-th output row is one-hot on script[n], then on
// EOS. It lets the real scheduler and server run outputs that only a
// reasoning model would write. It records the prompt of the latest
// sequence.
type scriptBackend struct {
	*kvcache.Cache
	vocab  int
	eos    int32
	script []int32

	mu     sync.Mutex
	fed    map[kvcache.SeqID][]int32
	outs   map[kvcache.SeqID]int
	prompt []int32
}

func (b *scriptBackend) Vocab() int               { return b.vocab }
func (b *scriptBackend) KVConfig() kvcache.Config { return b.Config() }
func (b *scriptBackend) KVStats() kvcache.Stats   { return b.Stats() }
func (b *scriptBackend) Close() error             { return nil }
func (b *scriptBackend) lastPrompt() []int32      { b.mu.Lock(); defer b.mu.Unlock(); return b.prompt }
func (b *scriptBackend) setScript(s []int32)      { b.mu.Lock(); b.script = s; b.mu.Unlock() }

// generated is how many tokens a request gets: the script up to its first
// end-of-generation token.
func (b *scriptBackend) generated(tok *tokenizer.Tokenizer) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, id := range b.script {
		if tok.IsEOG(id) {
			return i
		}
	}
	return len(b.script)
}

func (b *scriptBackend) Forward(batch *model.Batch, _ engine.Output, logits []float32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	row := 0
	for i, seq := range batch.Seq {
		b.fed[seq] = append(b.fed[seq], batch.Tokens[i])
		if err := b.Commit(seq, int(batch.Pos[i])+1); err != nil {
			return err
		}
		if !batch.Output[i] {
			continue
		}
		n := b.outs[seq]
		b.outs[seq]++
		if n == 0 {
			b.prompt = slices.Clone(b.fed[seq])
		}
		next := b.eos
		if n < len(b.script) {
			next = b.script[n]
		}
		r := logits[row*b.vocab : (row+1)*b.vocab]
		clear(r)
		r[next] = 10
		row++
	}
	return nil
}

// reasoningVocab is a SentencePiece vocabulary of byte tokens with the
// think and harmony tags as control tokens, so the detokenizer would drop
// them unless the server writes them out. (The tokenizer itself turns
// harmony's tags into user-defined tokens, as llama.cpp does for gpt-oss;
// the think tags stay control tokens.)
func reasoningVocab() *tokenizer.Vocab {
	toks := []string{"<unk>", "<s>", "</s>", "\u2581"}
	types := []int32{tokenizer.TypeUnknown, tokenizer.TypeControl, tokenizer.TypeControl, tokenizer.TypeNormal}
	for i := range 256 {
		toks = append(toks, fmt.Sprintf("<0x%02X>", i))
		types = append(types, tokenizer.TypeByte)
	}
	for _, tag := range append(chat.ReasoningHarmony.Tags(), chat.ReasoningThink.Tags()...) {
		toks = append(toks, tag)
		types = append(types, tokenizer.TypeControl)
	}
	return &tokenizer.Vocab{Model: "llama", Tokens: toks, Types: types, BOS: 1, EOS: 2, EOT: -1, EOM: -1, UNK: 0, PAD: -1, AddBOS: true}
}

type scriptServer struct {
	url     string
	backend *scriptBackend
	tok     *tokenizer.Tokenizer
	logMu   sync.Mutex
	log     []string
}

// startScripted serves the template file name (from the shared templates)
// over the script backend on a real listener.
func startScripted(t *testing.T, name string) *scriptServer {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(templateDir, name+".jinja"))
	if err != nil {
		sharedtest.Missing(t, "shared chat templates absent (%v)", err)
	}
	tmpl, err := chat.Parse(name, string(src))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(reasoningVocab())
	if err != nil {
		t.Fatal(err)
	}
	cache, err := kvcache.New(kvcache.Config{Layers: 1, KVDim: 1, BlockSize: 16, Blocks: 256, F32: true})
	if err != nil {
		t.Fatal(err)
	}
	b := &scriptBackend{Cache: cache, vocab: tok.VocabSize(), eos: tok.EOS(), fed: map[kvcache.SeqID][]int32{}, outs: map[kvcache.SeqID]int{}}
	// No prefix reuse: each request's prompt is then fed whole and recorded.
	sched, err := engine.NewScheduler(b, engine.SchedulerConfig{Parallel: 2, Context: 2048, PrefixCache: -1, IsEOG: tok.IsEOG})
	if err != nil {
		t.Fatal(err)
	}
	schedCtx, stopSched := context.WithCancel(context.Background())
	schedDone := sched.Start(schedCtx)
	ss := &scriptServer{backend: b, tok: tok}
	logf := func(format string, a ...any) {
		ss.logMu.Lock()
		ss.log = append(ss.log, fmt.Sprintf(format, a...))
		ss.logMu.Unlock()
	}
	srv := New(Config{Model: "m", Logf: logf})
	srv.SetReady(&Backend{Sched: sched, Tok: tok, Template: tmpl, Vocab: tok.VocabSize()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 5*time.Second) }()
	ss.url = "http://" + ln.Addr().String()
	t.Cleanup(func() {
		stop()
		<-done
		stopSched()
		<-schedDone
	})
	return ss
}

// say makes the model write text (tags become their tokens).
func (ss *scriptServer) say(text string) {
	ss.backend.setScript(ss.tok.Encode(text, false, true))
}

func (ss *scriptServer) prompt() string {
	return ss.tok.DecodeWith(ss.backend.lastPrompt(), tokenizer.DecodeOptions{RenderSpecial: true})
}

type reasoningReply struct {
	Choices []struct {
		Message *struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"message"`
		Delta *struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
		Logprobs     *struct {
			Content []json.RawMessage `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Param   string `json:"param"`
	} `json:"error"`
}

// chatOnce sends a non-streamed chat request with the extra body fields.
func (ss *scriptServer) chatOnce(t *testing.T, extra string) (int, reasoningReply) {
	t.Helper()
	ts := &testServer{url: ss.url}
	code, data := ts.post(t, "/v1/chat/completions", "", []byte(`{"model":"m","messages":[{"role":"user","content":"Hi"}],"temperature":0`+extra+`}`))
	var r reasoningReply
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("reply is not JSON (%v): %s", err, data)
	}
	return code, r
}

type streamed struct {
	reasoning, content string
	reasoningChunks    int
	contentAfter       bool // a reasoning delta came after content
	logprobs           int
	completionTokens   int
	finish             string
}

// chatStreamed sends a streamed chat request with logprobs and gathers
// the deltas.
func (ss *scriptServer) chatStreamed(t *testing.T, extra string) streamed {
	t.Helper()
	ts := &testServer{url: ss.url}
	resp := ts.stream(t, context.Background(), "/v1/chat/completions",
		`{"model":"m","messages":[{"role":"user","content":"Hi"}],"temperature":0,"stream":true,"logprobs":true`+extra+`}`)
	defer resp.Body.Close()
	var s streamed
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			return s
		}
		var c reasoningReply
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("bad SSE event %q: %v", line, err)
		}
		if c.Usage != nil {
			s.completionTokens = c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			if d := ch.Delta; d != nil {
				if d.ReasoningContent != nil {
					s.reasoning += *d.ReasoningContent
					s.reasoningChunks++
					s.contentAfter = s.contentAfter || s.content != ""
				}
				if d.Content != nil {
					s.content += *d.Content
				}
			}
			if ch.Logprobs != nil {
				s.logprobs += len(ch.Logprobs.Content)
			}
			if ch.FinishReason != nil {
				s.finish = *ch.FinishReason
			}
		}
	}
	t.Fatal("stream ended without [DONE]")
	return s
}

func TestReasoningHarmonyHTTP(t *testing.T) {
	ss := startScripted(t, "openai-gpt-oss-120b")
	if n := countLog(ss, "reasoning format from the chat template: harmony"); n != 1 {
		t.Errorf("the format was logged %d times, want once: %q", n, ss.log)
	}
	const (
		analysis = "The user greets me. I should greet back."
		final    = "Hello! How can I help?"
	)
	raw := "<|channel|>analysis<|message|>" + analysis + "<|end|><|start|>assistant<|channel|>final<|message|>" + final
	ss.say(raw + "<|return|>")

	checkSplit(t, ss, "", analysis, final)
	if p := ss.prompt(); !strings.Contains(p, "\nReasoning: medium\n") || !strings.HasSuffix(p, "<|start|>assistant") {
		t.Errorf("default prompt lacks the template's default effort:\n%s", p)
	}

	for _, c := range []struct{ extra, effort string }{
		{`,"reasoning_effort":"high"`, "high"},
		{`,"chat_template_kwargs":{"reasoning_effort":"low"}`, "low"},
		{`,"chat_template_kwargs":{"reasoning_effort":"low"},"reasoning_effort":"high"`, "high"},
	} {
		if code, r := ss.chatOnce(t, c.extra); code != 200 {
			t.Fatalf("%s: status %d: %+v", c.extra, code, r.Error)
		}
		if p := ss.prompt(); !strings.Contains(p, "\nReasoning: "+c.effort+"\n") {
			t.Errorf("%s: prompt has no \"Reasoning: %s\":\n%s", c.extra, c.effort, p)
		}
	}

	// reasoning_format none: the raw text, tags and all (the EOG token
	// <|return|> ends the generation and is not part of it).
	code, r := ss.chatOnce(t, `,"reasoning_format":"none"`)
	if code != 200 || r.Choices[0].Message.Content == nil || *r.Choices[0].Message.Content != raw || r.Choices[0].Message.ReasoningContent != nil {
		t.Errorf("reasoning_format none: status %d, message %+v; want content %q alone", code, r.Choices[0].Message, raw)
	}
	s := ss.chatStreamed(t, `,"reasoning_format":"none"`)
	if s.content != raw || s.reasoning != "" {
		t.Errorf("reasoning_format none streamed: content %q reasoning %q", s.content, s.reasoning)
	}

	// A tool call is another feature's: until then it must reach the
	// client whole, as content.
	call := "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}"
	ss.say("<|channel|>analysis<|message|>Need the weather.<|end|>" + call + "<|call|>")
	checkSplit(t, ss, "", "Need the weather.", call)
}

func TestReasoningThinkHTTP(t *testing.T) {
	for _, c := range []struct {
		template, output string
	}{
		// Qwen3's prompt ends at "assistant\n": the model opens <think>.
		{"Qwen-Qwen3-0.6B", "<think>\nThe user says hi.\nGreet back.\n</think>\n\nHello!"},
		// This DeepSeek-R1 prompt ends with "<think>\n": the output
		// starts inside the reasoning and only </think> appears.
		{"llama-cpp-deepseek-r1", "The user says hi.\nGreet back.\n</think>\n\nHello!"},
	} {
		t.Run(c.template, func(t *testing.T) {
			ss := startScripted(t, c.template)
			if n := countLog(ss, "reasoning format from the chat template: think tags"); n != 1 {
				t.Errorf("the format was logged %d times, want once: %q", n, ss.log)
			}
			ss.say(c.output)
			checkSplit(t, ss, "", "The user says hi.\nGreet back.", "Hello!")
			_, r := ss.chatOnce(t, `,"reasoning_format":"none"`)
			if got := *r.Choices[0].Message.Content; got != c.output {
				t.Errorf("reasoning_format none: content %q, want the raw %q (control-token tags written out)", got, c.output)
			}
		})
	}
}

func TestReasoningBadFields(t *testing.T) {
	ss := startScripted(t, "openai-gpt-oss-120b")
	ss.say("<|channel|>final<|message|>x")
	for _, c := range []struct{ extra, param, mention string }{
		{`,"reasoning_effort":"extreme"`, "reasoning_effort", `"extreme"`},
		{`,"reasoning_effort":3`, "reasoning_effort", "string"},
		{`,"reasoning_format":"parsed"`, "reasoning_format", `"parsed"`},
		{`,"chat_template_kwargs":{"reasoning_effort":"max"}`, "chat_template_kwargs", `"max"`},
		{`,"chat_template_kwargs":{"messages":[]}`, "chat_template_kwargs", `"messages"`},
		{`,"chat_template_kwargs":[1]`, "chat_template_kwargs", "object"},
	} {
		code, r := ss.chatOnce(t, c.extra)
		if code != 400 || r.Error == nil || r.Error.Param != c.param || !strings.Contains(r.Error.Message, c.mention) {
			t.Errorf("%s: status %d, error %+v; want 400 on %s naming %s", c.extra, code, r.Error, c.param, c.mention)
		}
	}
	// Variables a template does not read are harmless.
	if code, r := ss.chatOnce(t, `,"chat_template_kwargs":{"enable_thinking":false,"builtin_tools":["python"]}`); code != 200 {
		t.Errorf("chat_template_kwargs: status %d: %+v", code, r.Error)
	}
	if p := ss.prompt(); !strings.Contains(p, "## python") {
		t.Errorf("chat_template_kwargs builtin_tools did not reach the template:\n%s", p)
	}
}

// TestReasoningRealModel runs stories260K (which knows nothing of
// reasoning) under a template that opens <think> in the prompt: its whole
// output is then reasoning, and equals the raw text of the same greedy
// request with reasoning_format none, less the surrounding whitespace.
func TestReasoningRealModel(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(templateDir, "llama-cpp-deepseek-r1.jinja"))
	if err != nil {
		sharedtest.Missing(t, "shared chat templates absent (%v)", err)
	}
	ts := startServer(t, opts{parallel: 1, ctx: 256})
	b, _ := ts.srv.state()
	tmpl, err := chat.Parse("r1", string(src))
	if err != nil {
		t.Fatal(err)
	}
	ts.srv.SetReady(&Backend{Sched: b.Sched, Tok: b.Tok, Template: tmpl, Vocab: b.Vocab})
	ask := func(extra string) reasoningReply {
		code, data := ts.post(t, "/v1/chat/completions", testKey, []byte(`{"model":"stories","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":24,"temperature":0`+extra+`}`))
		if code != 200 {
			t.Fatalf("status %d: %s", code, data)
		}
		var r reasoningReply
		json.Unmarshal(data, &r)
		return r
	}
	raw := *ask(`,"reasoning_format":"none"`).Choices[0].Message.Content
	m := ask("").Choices[0].Message
	if strings.TrimSpace(raw) == "" || m.ReasoningContent == nil || *m.ReasoningContent != strings.Trim(raw, " \t\r\n") || *m.Content != "" {
		t.Errorf("raw %q split into reasoning %s content %s", raw, str(m.ReasoningContent), str(m.Content))
	}
}

func countLog(ss *scriptServer, s string) int {
	ss.logMu.Lock()
	defer ss.logMu.Unlock()
	n := 0
	for _, l := range ss.log {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// checkSplit expects the reasoning and content, whole and streamed; the
// stream must send every reasoning delta before the first content delta,
// the reasoning in more than one delta (as it is generated), and each
// token's logprobs once.
func checkSplit(t *testing.T, ss *scriptServer, extra, reasoning, content string) {
	t.Helper()
	code, r := ss.chatOnce(t, extra)
	if code != 200 {
		t.Fatalf("status %d: %+v", code, r.Error)
	}
	m := r.Choices[0].Message
	if m == nil {
		t.Fatal("whole: no message")
	}
	if m.Content == nil || *m.Content != content || m.ReasoningContent == nil || *m.ReasoningContent != reasoning {
		t.Errorf("whole: reasoning %s content %s, want %q and %q", str(m.ReasoningContent), str(m.Content), reasoning, content)
	} else if *r.Choices[0].FinishReason != "stop" {
		t.Errorf("whole: finish %q", *r.Choices[0].FinishReason)
	}
	s := ss.chatStreamed(t, extra)
	if s.reasoning != reasoning || s.content != content {
		t.Errorf("streamed: reasoning %q content %q, want %q and %q", s.reasoning, s.content, reasoning, content)
	}
	if s.contentAfter {
		t.Error("streamed: reasoning_content after content")
	}
	if s.reasoningChunks < 2 {
		t.Errorf("streamed: reasoning in %d deltas, want it token by token", s.reasoningChunks)
	}
	if want := ss.backend.generated(ss.tok); s.logprobs != want || s.completionTokens != want {
		t.Errorf("streamed: %d logprobs and %d completion tokens, want %d", s.logprobs, s.completionTokens, want)
	}
	if s.finish != "stop" {
		t.Errorf("streamed: finish %q", s.finish)
	}
}

func str(p *string) string {
	if p == nil {
		return "(absent)"
	}
	return fmt.Sprintf("%q", *p)
}
