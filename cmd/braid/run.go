package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"braid/internal/chat"
	"braid/internal/engine"
	"braid/internal/sample"
	"braid/internal/tokenizer"
)

func init() {
	register("run", "generate text from a prompt, streamed to stdout", runRun)
}

func runRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "-m MODEL -p TEXT [-n N] [--chat [--system TEXT] [--hide-reasoning] [--reasoning-format auto|none] [--reasoning-effort E]] [--temp T] [--top-k K] [--top-p P] [--seed S] [-c CTX] [-t THREADS]", stderr)
	var mf modelFlags
	mf.register(fs)
	var cf clusterFlags
	cf.register(fs)
	prompt := fs.String("p", "", "prompt text")
	n := fs.Int("n", 128, "most tokens to generate")
	useChat := fs.Bool("chat", false, "wrap the prompt as a user message in the model's chat template")
	system := fs.String("system", "", "system message (with --chat)")
	hideReasoning := fs.Bool("hide-reasoning", false, "with --chat, print only the answer, not the model's reasoning")
	reasoningFormat := fs.String("reasoning-format", "auto", "with --chat: auto shows reasoning apart from the answer; none prints the raw text")
	reasoningEffort := fs.String("reasoning-effort", "", "with --chat: low, medium or high, passed to the chat template (gpt-oss reads it)")
	def := sample.DefaultParams()
	temp := fs.Float64("temp", float64(def.Temperature), "temperature; 0 = greedy")
	topK := fs.Int("top-k", def.TopK, "top-k; 0 = off")
	topP := fs.Float64("top-p", float64(def.TopP), "top-p; 1 = off")
	minP := fs.Float64("min-p", float64(def.MinP), "min-p; 0 = off")
	repeat := fs.Float64("repeat-penalty", 1, "repetition penalty; 1 = off")
	seed := fs.Uint64("seed", 0, "sampling seed (same seed, same output)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *prompt == "" {
		return usagef("-p TEXT is required")
	}
	if *n < 0 {
		return usagef("-n %d: must not be negative", *n)
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
	params.RepeatPenalty, params.Seed = float32(*repeat), *seed
	if params.RepeatPenalty != 1 {
		params.RepeatLastN = 64
	}
	l, err := loadBackend(&mf, &cf, 1, stderr)
	if err != nil {
		return err
	}
	defer l.Close()
	tok, err := tokenizer.FromGGUF(l.file)
	if err != nil {
		return err
	}
	text := *prompt
	dec := tok.NewDecoder()
	out := &chatPrinter{w: stdout}
	var render map[int32]bool
	if *useChat {
		var tmpl *chat.Template
		if text, tmpl, err = renderChat(l, tok, *system, *prompt, *reasoningEffort, stderr); err != nil {
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
	smp, err := sample.New(params, l.backend.Vocab())
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	st, err := l.generate(ctx, engine.Request{
		Prompt: ids, MaxTokens: *n, Context: l.ctx, Sampler: smp, Stop: tok.IsEOG,
		Emit: func(id int32) error {
			dec.RenderSpecial = render[id]
			return out.write(dec.Add(id))
		},
	})
	out.write(dec.Flush())
	out.close()
	fmt.Fprintln(stdout)
	fmt.Fprintf(stderr, "prompt %d tokens, %.1f tok/s | generated %d tokens, %.1f tok/s | time to first token %.0f ms\n",
		st.PromptTokens, st.PrefillTPS(), st.GenTokens, st.DecodeTPS(), float64(st.TTFT.Microseconds())/1000)
	return err
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
