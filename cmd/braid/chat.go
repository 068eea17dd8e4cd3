package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"

	"braid/internal/chat"
	"braid/internal/engine"
	"braid/internal/sample"
	"braid/internal/tokenizer"
)

func init() {
	register("chat", "talk with a model on the terminal: its chat template, history, streamed replies", runChat)
}

const chatHelp = "/reset starts the conversation over, /exit (or Ctrl-D) quits; Ctrl-C stops an answer"

// runChat is an interactive conversation: each line read is a user
// message, answered in the model's chat template with the whole
// conversation so far; a reasoning model's thinking is shown dimmed (or
// hidden). Ctrl-C stops the answer being written, not the program.
func runChat(args []string, stdout, stderr io.Writer) error {
	return chatSession(os.Stdin, args, stdout, stderr)
}

func chatSession(stdin io.Reader, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("chat", "-m MODEL [--system TEXT] [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [-c CTX] [-t THREADS] [--hide-reasoning] [--reasoning-effort E]", stderr)
	var mf modelFlags
	mf.register(fs)
	var cf clusterFlags
	cf.register(fs)
	system := fs.String("system", "", "system message")
	n := fs.Int("n", -1, "most tokens per answer; -1: until the end of the answer or a full context")
	hideReasoning := fs.Bool("hide-reasoning", false, "print only the answers, not the model's reasoning")
	reasoningEffort := fs.String("reasoning-effort", "", "low, medium or high, passed to the chat template (gpt-oss reads it)")
	def := sample.DefaultParams()
	temp := fs.Float64("temp", float32Default(def.Temperature), "temperature; 0 = greedy")
	topK := fs.Int("top-k", def.TopK, "top-k; 0 = off")
	topP := fs.Float64("top-p", float32Default(def.TopP), "top-p; 1 = off")
	minP := fs.Float64("min-p", float32Default(def.MinP), "min-p; 0 = off")
	repeat := fs.Float64("repeat-penalty", 1, "repetition penalty; 1 = off")
	seed := seedFlag(fs)
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *n < -1 || *n == 0 {
		return usagef("-n %d: give a number of tokens, or -1 for no limit but the context", *n)
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
	l, err := loadBackend(&mf, &cf, 1, stderr)
	if err != nil {
		return err
	}
	defer l.Close()
	tok, err := tokenizer.FromGGUF(l.file)
	if err != nil {
		return err
	}
	tmpl, err := chatTemplate(l, stderr)
	if err != nil {
		return err
	}
	format := chat.DetectReasoning(tmpl.Source())
	render := format.ControlTags(tok)
	tty := isTerminal(stdout) && os.Getenv("NO_COLOR") == ""
	if params.Temperature > 0 {
		fmt.Fprintf(stderr, "braid: seed %d (--seed %d repeats the conversation)\n", params.Seed, params.Seed)
	}
	fmt.Fprintf(stderr, "braid chat: %s, context %d tokens; %s\n", l.file.Files[0].Path, l.ctx, chatHelp)

	// Ctrl-C cancels the answer being written; at the prompt it says how
	// to quit.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	var mu sync.Mutex
	var stopAnswer context.CancelFunc
	go func() {
		for range sigs {
			mu.Lock()
			if stopAnswer != nil {
				stopAnswer()
			} else {
				fmt.Fprintf(stdout, "\n(%s)\n> ", chatHelp)
			}
			mu.Unlock()
		}
	}()

	var history []chat.Message
	in := bufio.NewReader(stdin)
	for {
		fmt.Fprint(stdout, "> ")
		line, err := in.ReadString('\n')
		if err != nil && (line == "" || !errors.Is(err, io.EOF)) {
			fmt.Fprintln(stdout)
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		text := strings.TrimRight(line, "\r\n")
		switch strings.TrimSpace(text) {
		case "":
			continue
		case "/exit", "/quit", "/bye":
			return nil
		case "/reset", "/clear":
			history = nil
			fmt.Fprintln(stdout, "(the conversation starts over)")
			continue
		case "/help", "/?":
			fmt.Fprintln(stdout, "("+chatHelp+")")
			continue
		}
		if strings.HasPrefix(text, "/") && !strings.Contains(strings.TrimSpace(text), " ") {
			fmt.Fprintf(stdout, "(no command %s: %s)\n", strings.TrimSpace(text), chatHelp)
			continue
		}
		msgs := history
		if *system != "" {
			msgs = append([]chat.Message{{Role: "system", Content: *system}}, history...)
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: text})
		prompt, err := renderMessages(tmpl, tok, msgs, *reasoningEffort)
		if err != nil {
			fmt.Fprintf(stdout, "(the chat template refused the conversation: %v)\n", err)
			continue
		}
		ids := tok.Encode(prompt, true, true)
		if len(ids) >= l.ctx {
			fmt.Fprintf(stdout, "(the conversation is %d tokens and the context holds %d: /reset to start over)\n", len(ids), l.ctx)
			continue
		}
		maxTok := l.ctx - len(ids)
		if *n > 0 {
			maxTok = min(maxTok, *n)
		}
		smp, err := sample.New(params, l.backend.Vocab())
		if err != nil {
			return err
		}
		params.Seed++ // the next answer draws other numbers
		out := &chatPrinter{w: stdout, hide: *hideReasoning, tty: tty}
		if format != chat.ReasoningNone {
			out.parser = chat.NewReasoningParser(format, prompt)
		}
		dec := tok.NewDecoder()
		var raw strings.Builder
		var tm tokenTimes
		ctx, cancel := context.WithCancel(context.Background())
		mu.Lock()
		stopAnswer = cancel
		mu.Unlock()
		st, gerr := l.generate(ctx, engine.Request{
			Prompt: ids, MaxTokens: maxTok, Context: l.ctx, Sampler: smp, Stop: tok.IsEOG,
			Emit: func(id int32) error {
				tm.mark()
				dec.RenderSpecial = render[id]
				s := dec.Add(id)
				raw.WriteString(s)
				return out.write(s)
			},
		})
		mu.Lock()
		stopAnswer = nil
		mu.Unlock()
		interrupted := ctx.Err() != nil
		cancel()
		s := dec.Flush()
		raw.WriteString(s)
		out.write(s)
		out.close()
		fmt.Fprintln(stdout)
		switch {
		case interrupted:
			fmt.Fprintln(stdout, "(stopped)")
		case gerr != nil:
			return gerr
		case st.GenTokens == maxTok && len(ids)+st.GenTokens >= l.ctx:
			fmt.Fprintln(stdout, "(the context is full: /reset to start over)")
		}
		fmt.Fprintf(stderr, "%d tokens, %.1f tok/s, first after %.0f ms\n", st.GenTokens, tm.rate(st), float64(st.TTFT.Microseconds())/1000)
		// The history keeps the answer without its reasoning, as the chat
		// templates expect earlier turns.
		answer := raw.String()
		if format != chat.ReasoningNone {
			p := chat.NewReasoningParser(format, prompt)
			a := p.Add(answer)
			b := p.Flush()
			answer = a.Content + b.Content
		}
		history = append(history, chat.Message{Role: "user", Content: text}, chat.Message{Role: "assistant", Content: strings.TrimSpace(answer)})
	}
}

// chatTemplate is the model's chat template, or ChatML (said on stderr)
// when it has none.
func chatTemplate(l *loaded, stderr io.Writer) (*chat.Template, error) {
	if src, ok := l.file.String("tokenizer.chat_template"); ok && src != "" {
		t, err := chat.Parse("tokenizer.chat_template", src)
		if err != nil {
			return nil, fmt.Errorf("the model's chat template: %w", err)
		}
		return t, nil
	}
	fmt.Fprintln(stderr, "braid: the model has no chat template; using ChatML")
	return chat.ChatML(), nil
}

// renderMessages renders a conversation for the model's next answer.
func renderMessages(t *chat.Template, tok *tokenizer.Tokenizer, msgs []chat.Message, effort string) (string, error) {
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
	return t.RenderChat(msgs, opts)
}
