// Package jsclients runs real client libraries from the npm registry (the
// openai Node SDK, LangChain, the Vercel AI SDK, the OpenAI Agents SDK;
// package.json pins them)
// against a real braid serve: the conversations of tests/README.md.
package jsclients

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/internal/servetest"
	"braid/internal/sharedtest"
)

// A random-weight Qwen3 (the stories vocabulary) with a chat template that
// renders tools and parses Hermes-style <tool_call> blocks.
const (
	model    = "../../../shared/testdata/models/tiny-qwen3/tiny-qwen3-Q8_0.gguf"
	template = "../../../shared/testdata/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
)

// The scripts, each a list of conversations (step() in common.mjs).
var scripts = []string{"openai.mjs", "langchain.mjs", "aisdk.mjs", "agents.mjs"}

// missing skips, or fails where BRAID_REQUIRE_CLIENTS=1 (.ci/run sets it:
// CI must not pass without the clients).
func missing(t *testing.T, format string, a ...any) {
	t.Helper()
	if os.Getenv("BRAID_REQUIRE_CLIENTS") == "1" {
		t.Fatalf(format+" (BRAID_REQUIRE_CLIENTS=1)", a...)
	}
	t.Skipf(format, a...)
}

func TestClients(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not on PATH: skipping the client libraries' conversations")
	}
	for _, pkg := range []string{"openai", "@langchain/openai", "langchain", "ai", "@ai-sdk/openai-compatible", "@openai/agents"} {
		if _, err := os.Stat(filepath.Join("node_modules", pkg)); err != nil {
			missing(t, "tests/js-clients/node_modules/%s is absent (npm ci there; .ci/run does): skipping", pkg)
		}
	}
	for _, f := range []string{model, template} {
		if _, err := os.Stat(f); err != nil {
			sharedtest.Missing(t, "shared test data absent (%v): skipping the client libraries' conversations", err)
		}
	}
	bin := servetest.Build(t)
	const key = "sk-braid-js-clients"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv := servetest.Start(t, ctx, time.Minute, bin, "-m", model, "--chat-template-file", template,
		"-c", "2048", "--parallel", "2", "--alias", "tiny", "--api-key", key, "-t", "2")
	url := srv.URL
	for _, s := range scripts {
		t.Run(strings.TrimSuffix(s, ".mjs"), func(t *testing.T) {
			cmd := exec.CommandContext(ctx, node, s, url)
			cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+key, "BRAID_MODEL=tiny")
			out, err := cmd.CombinedOutput()
			t.Logf("node %s:\n%s", s, out)
			if err != nil {
				t.Fatalf("%s failed: %v", s, err)
			}
			n := 0
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "ok ") {
					n++
				}
			}
			if n < 4 {
				t.Fatalf("%s passed only %d conversations", s, n)
			}
		})
	}
}
