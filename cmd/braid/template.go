package main

import (
	"fmt"
	"io"
	"time"

	"braid/internal/chat"
)

func init() {
	register("template", "render a chat template for a JSON context (no model needed)", runTemplate)
}

func runTemplate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("template", "--template FILE.jinja --context FILE.json [--now 2026-11-26]", stderr)
	tmpl := fs.String("template", "", "the chat template (Jinja)")
	ctx := fs.String("context", "", "JSON object: messages, tools, add_generation_prompt, bos_token, eos_token, ...")
	nowFlag := fs.String("now", "", "the date strftime_now formats, as YYYY-MM-DD (default: today)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *tmpl == "" || *ctx == "" {
		return usagef("--template and --context are required")
	}
	now := time.Now()
	if *nowFlag != "" {
		t, err := time.Parse("2006-01-02", *nowFlag)
		if err != nil {
			return usagef("--now %q: want a date like 2026-11-26", *nowFlag)
		}
		now = t
	}
	out, err := chat.RenderContextFile(*tmpl, *ctx, now)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(stdout, out)
	return err
}
