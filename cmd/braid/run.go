package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"braid/internal/chat"
	"braid/internal/engine"
	"braid/internal/sample"
	"braid/internal/tokenizer"
)

func init() {
	register("run", "generate text from a prompt, streamed to stdout", runRun)
}

func runRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "-m MODEL -p TEXT [-n N] [--chat] [--system TEXT] [--temp T] [--top-k K] [--top-p P] [--seed S] [-c CTX] [-t THREADS]", stderr)
	var mf modelFlags
	mf.register(fs)
	var cf clusterFlags
	cf.register(fs)
	prompt := fs.String("p", "", "prompt text")
	n := fs.Int("n", 128, "most tokens to generate")
	useChat := fs.Bool("chat", false, "wrap the prompt as a user message in the model's chat template")
	system := fs.String("system", "", "system message (with --chat)")
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
	if *useChat {
		if text, err = renderChat(l, tok, *system, *prompt, stderr); err != nil {
			return err
		}
	}
	ids := tok.Encode(text, true, *useChat)
	smp, err := sample.New(params, l.backend.Vocab())
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	dec := tok.NewDecoder()
	st, err := l.generate(ctx, engine.Request{
		Prompt: ids, MaxTokens: *n, Context: l.ctx, Sampler: smp, Stop: tok.IsEOG,
		Emit: func(id int32) error {
			_, err := io.WriteString(stdout, dec.Add(id))
			return err
		},
	})
	io.WriteString(stdout, dec.Flush())
	fmt.Fprintln(stdout)
	fmt.Fprintf(stderr, "prompt %d tokens, %.1f tok/s | generated %d tokens, %.1f tok/s | time to first token %.0f ms\n",
		st.PromptTokens, st.PrefillTPS(), st.GenTokens, st.DecodeTPS(), float64(st.TTFT.Microseconds())/1000)
	return err
}

// renderChat wraps the prompt in the model's chat template, or ChatML (said
// on stderr) when the model has none.
func renderChat(l *loaded, tok *tokenizer.Tokenizer, system, prompt string, stderr io.Writer) (string, error) {
	var t *chat.Template
	if src, ok := l.file.String("tokenizer.chat_template"); ok && src != "" {
		var err error
		if t, err = chat.Parse("tokenizer.chat_template", src); err != nil {
			return "", err
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
	return t.RenderChat(msgs, opts)
}
