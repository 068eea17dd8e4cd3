package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"braid/internal/chat"
	"braid/internal/engine"
	"braid/internal/sample"
	"braid/internal/tokenizer"
)

func init() {
	register("run", "generate text from a prompt, streamed to stdout", runRun)
}

func runRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "-m MODEL (-p TEXT | -f FILE) [-n N] [--chat [--system TEXT] [--hide-reasoning] [--reasoning-format auto|none] [--reasoning-effort E]] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [-c CTX] [-t THREADS] [--spec ngram|draft|mtp|none [--model-draft F] [--spec-n-max N] [--spec-n-min N]]", stderr)
	var mf modelFlags
	mf.register(fs)
	var cf clusterFlags
	cf.register(fs)
	prompt := fs.String("p", "", "prompt `text` (\"\" starts from the beginning-of-sequence token)")
	promptFile := fs.String("f", "", "read the prompt from this `file`")
	n := fs.Int("n", 128, "most tokens to generate; -1: until the end of generation or a full context")
	useChat := fs.Bool("chat", false, "wrap the prompt as a user message in the model's chat template")
	system := fs.String("system", "", "system message (with --chat)")
	hideReasoning := fs.Bool("hide-reasoning", false, "with --chat, print only the answer, not the model's reasoning")
	reasoningFormat := fs.String("reasoning-format", "auto", "with --chat: auto shows reasoning apart from the answer; none prints the raw text")
	reasoningEffort := fs.String("reasoning-effort", "", "with --chat: low, medium or high, passed to the chat template (gpt-oss reads it)")
	def := sample.DefaultParams()
	temp := fs.Float64("temp", float32Default(def.Temperature), "temperature; 0 = greedy")
	topK := fs.Int("top-k", def.TopK, "top-k; 0 = off")
	topP := fs.Float64("top-p", float32Default(def.TopP), "top-p; 1 = off")
	minP := fs.Float64("min-p", float32Default(def.MinP), "min-p; 0 = off")
	repeat := fs.Float64("repeat-penalty", 1, "repetition penalty; 1 = off")
	seed := seedFlag(fs)
	var sf specFlags
	sf.register(fs, false)
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if err := sf.check(false); err != nil {
		return err
	}
	text, err := readPrompt(fs, *prompt, *promptFile)
	if err != nil {
		return err
	}
	if *n < -1 {
		return usagef("-n %d: give a number of tokens, or -1 for no limit but the context", *n)
	}
	if *system != "" && !*useChat {
		return usagef("--system needs --chat (the system message goes into the model's chat template)")
	}
	if *reasoningFormat != "auto" && *reasoningFormat != "none" {
		return usagef("--reasoning-format %q: must be auto or none", *reasoningFormat)
	}
	if *reasoningEffort != "" {
		if err := chat.CheckReasoningEffort(*reasoningEffort); err != nil {
			return usagef("--reasoning-effort: %v", err)
		}
	}
	params := def
	params.Temperature, params.TopK, params.TopP, params.MinP = float32(*temp), *topK, float32(*topP), float32(*minP)
	params.RepeatPenalty, params.Seed = float32(*repeat), seed.value()
	if params.RepeatPenalty != 1 {
		params.RepeatLastN = 64
	}
	if err := params.Validate(); err != nil {
		return usageError{err}
	}
	if err := sf.prepare(&mf, &cf, stderr); err != nil {
		return err
	}
	l, err := loadBackend(&mf, &cf, 1, stderr)
	if err != nil {
		return err
	}
	defer l.Close()
	gen, sst, release, err := sf.generator(l, &mf, stderr)
	if err != nil {
		return err
	}
	defer release()
	tok, err := tokenizer.FromGGUF(l.file)
	if err != nil {
		return err
	}
	dec := tok.NewDecoder()
	out := &chatPrinter{w: stdout}
	var render map[int32]bool
	if *useChat {
		var tmpl *chat.Template
		if text, tmpl, err = renderChat(l, tok, *system, text, *reasoningEffort, stderr); err != nil {
			return err
		}
		// The format's tags are written out even as raw text: without
		// them the reasoning and the answer run together.
		f := chat.DetectReasoning(tmpl.Source())
		render = f.ControlTags(tok)
		if f != chat.ReasoningNone && *reasoningFormat != "none" {
			out.parser = chat.NewReasoningParser(f, text)
			out.hide, out.tty = *hideReasoning, isTerminal(stdout) && os.Getenv("NO_COLOR") == ""
		}
	}
	ids := tok.Encode(text, true, *useChat)
	if len(ids) == 0 {
		// llama.cpp starts an empty prompt from the BOS token.
		if tok.BOS() < 0 {
			return usagef("the prompt is empty and the model has no beginning-of-sequence token to start from")
		}
		ids = []int32{tok.BOS()}
	}
	maxTok, err := generationLimit(*n, len(ids), l.ctx, stderr)
	if err != nil {
		return err
	}
	smp, err := sample.New(params, l.backend.Vocab())
	if err != nil {
		return err
	}
	if params.Temperature > 0 {
		fmt.Fprintf(stderr, "braid: seed %d (--seed %d repeats this run)\n", params.Seed, params.Seed)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	var tm tokenTimes
	st, err := gen.Generate(ctx, engine.Request{
		Prompt: ids, MaxTokens: maxTok, Context: l.ctx, Sampler: smp, Stop: tok.IsEOG,
		Emit: func(id int32) error {
			tm.mark()
			dec.RenderSpecial = render[id]
			return out.write(dec.Add(id))
		},
	})
	out.write(dec.Flush())
	out.close()
	fmt.Fprintln(stdout)
	if err == nil && st.GenTokens == maxTok && len(ids)+st.GenTokens >= l.ctx {
		fmt.Fprintf(stderr, "braid: stopped at a full context: %d prompt + %d generated tokens = %d (-c)\n", len(ids), st.GenTokens, l.ctx)
	}
	fmt.Fprintf(stderr, "prompt %d tokens, %.1f tok/s | generated %d tokens, %.1f tok/s | time to first token %.0f ms\n",
		st.PromptTokens, st.PrefillTPS(), st.GenTokens, tm.rate(st), float64(st.TTFT.Microseconds())/1000)
	if sst != nil {
		fmt.Fprintln(stderr, sf.summary(sst))
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted after %d tokens", st.GenTokens)
	}
	return err
}

// generationLimit turns -n into the most tokens to generate after a prompt
// of p tokens in a context of ctx: -1 is whatever the context leaves; more
// than it leaves is said, with the numbers, and cut to fit.
func generationLimit(n, p, ctx int, stderr io.Writer) (int, error) {
	room := ctx - p
	if room <= 0 {
		return 0, fmt.Errorf("the prompt has %d tokens but the context holds %d (-c): no room to generate", p, ctx)
	}
	if n < 0 {
		return room, nil
	}
	if n > room {
		fmt.Fprintf(stderr, "braid: -n %d does not fit: the context holds %d tokens (-c) and the prompt takes %d; generating at most %d\n", n, ctx, p, room)
		return room, nil
	}
	return n, nil
}

// tokenTimes remembers when the first and the last token came, for a
// decode rate that holds when the generation ended early (interrupted,
// failed): the engine's own figure only counts a generation that finished.
type tokenTimes struct {
	n           int
	first, last time.Time
}

func (t *tokenTimes) mark() {
	now := time.Now()
	if t.n == 0 {
		t.first = now
	}
	t.last = now
	t.n++
}

// rate is the decode rate: the engine's, or from the marks when it has
// none.
func (t *tokenTimes) rate(st engine.Stats) float64 {
	if r := st.DecodeTPS(); r > 0 {
		return r
	}
	if d := t.last.Sub(t.first); t.n > 1 && d > 0 {
		return float64(t.n-1) / d.Seconds()
	}
	return 0
}

// renderChat wraps the prompt in the model's chat template, or ChatML (said
// on stderr) when the model has none, and returns the template too.
func renderChat(l *loaded, tok *tokenizer.Tokenizer, system, prompt, effort string, stderr io.Writer) (string, *chat.Template, error) {
	var t *chat.Template
	if src, ok := l.file.String("tokenizer.chat_template"); ok && src != "" {
		var err error
		if t, err = chat.Parse("tokenizer.chat_template", src); err != nil {
			return "", nil, err
		}
	} else {
		fmt.Fprintln(stderr, "braid: the model has no chat template; using ChatML")
		t = chat.ChatML()
	}
	var msgs []chat.Message
	if system != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: system})
	}
	msgs = append(msgs, chat.Message{Role: "user", Content: prompt})
	opts := chat.Options{AddGenerationPrompt: true}
	if tok.BOS() >= 0 {
		opts.BOS = tok.TokenText(tok.BOS())
	}
	if tok.EOS() >= 0 {
		opts.EOS = tok.TokenText(tok.EOS())
	}
	if effort != "" {
		opts.Extra = map[string]any{"reasoning_effort": effort}
	}
	text, err := t.RenderChat(msgs, opts)
	return text, t, err
}

// chatPrinter writes generated text, the reasoning apart from the answer:
// dimmed on a terminal, between separator lines otherwise (where escape
// codes would end up in a file or a pipe), or not at all.
type chatPrinter struct {
	w      io.Writer
	parser *chat.ReasoningParser // nil: raw text
	hide   bool
	tty    bool

	inReasoning bool // reasoning printed, its end not yet marked
}

const (
	ansiFaint = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

func (p *chatPrinter) write(text string) error {
	if p.parser == nil {
		_, err := io.WriteString(p.w, text)
		return err
	}
	return p.print(p.parser.Add(text))
}

// close prints what the parser held back and ends an open reasoning block.
func (p *chatPrinter) close() error {
	if p.parser == nil {
		return nil
	}
	if err := p.print(p.parser.Flush()); err != nil {
		return err
	}
	return p.endReasoning()
}

func (p *chatPrinter) print(d chat.Split) error {
	var b strings.Builder
	if d.Reasoning != "" && !p.hide {
		if !p.inReasoning {
			p.inReasoning = true
			if p.tty {
				b.WriteString(ansiFaint)
			} else {
				b.WriteString("----- reasoning -----\n")
			}
		}
		b.WriteString(d.Reasoning)
	}
	if _, err := io.WriteString(p.w, b.String()); err != nil {
		return err
	}
	if d.Content == "" {
		return nil
	}
	if err := p.endReasoning(); err != nil {
		return err
	}
	_, err := io.WriteString(p.w, d.Content)
	return err
}

func (p *chatPrinter) endReasoning() error {
	if !p.inReasoning {
		return nil
	}
	p.inReasoning = false
	end := "\n----- answer -----\n"
	if p.tty {
		end = ansiReset + "\n\n"
	}
	_, err := io.WriteString(p.w, end)
	return err
}
