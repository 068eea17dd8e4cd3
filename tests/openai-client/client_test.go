// Package openaiclient tests braid serve with the official openai npm
// package: the real binary, the real SDK.
package openaiclient

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"braid/internal/servetest"
	"braid/internal/sharedtest"
)

const model = "../../../shared/testdata/models/stories260K/stories260K-F32.gguf"

// sdk finds node and the installed SDK, or skips.
func sdk(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: skipping the openai SDK test")
	}
	if _, err := os.Stat("node_modules/openai"); err != nil {
		t.Skip("tests/openai-client/node_modules/openai is absent (run npm ci there; .ci/run does): skipping the openai SDK test")
	}
	if _, err := os.Stat(model); err != nil {
		sharedtest.Missing(t, "shared test model absent (%v): skipping the openai SDK test", err)
	}
	return node
}

// serveAndRun starts braid serve on stories260K with an API key (context
// ctxLen), runs `node script URL` against it and returns the server.
func serveAndRun(t *testing.T, script string, ctxLen string, limit time.Duration) *servetest.Server {
	t.Helper()
	node := sdk(t)
	bin := servetest.Build(t)
	keyFile := filepath.Join(t.TempDir(), "keys")
	const key = "sk-braid-sdk-test"
	os.WriteFile(keyFile, []byte(key+"\n"), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	srv := servetest.Start(t, ctx, time.Minute, bin, "-m", model, "-c", ctxLen, "--parallel", "2",
		"--alias", "stories", "--api-key-file", keyFile, "-t", "2")
	cmd := exec.CommandContext(ctx, node, script, srv.URL)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+key, "BRAID_MODEL=stories")
	out, err := cmd.CombinedOutput()
	t.Logf("node %s:\n%s", script, out)
	if err != nil {
		t.Fatalf("the openai SDK script %s failed: %v", script, err)
	}
	return srv
}

func TestOpenAINodeSDK(t *testing.T) {
	srv := serveAndRun(t, "script.mjs", "512", 2*time.Minute)
	// SIGTERM: a clean exit.
	if err := srv.Terminate(30 * time.Second); err != nil {
		t.Errorf("braid serve after SIGTERM: %v", err)
	}
}
