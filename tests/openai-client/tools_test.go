package openaiclient

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"braid/internal/sharedtest"
)

// TestOpenAINodeSDKTools runs tools.mjs (tool calls and structured
// outputs through the official SDK) against the real binary.
func TestOpenAINodeSDKTools(t *testing.T) {
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
	dir := t.TempDir()
	bin := filepath.Join(dir, "braid")
	if out, err := exec.Command("go", "build", "-o", bin, "braid/cmd/braid").CombinedOutput(); err != nil {
		t.Fatalf("building braid: %v\n%s", err, out)
	}
	keyFile := filepath.Join(dir, "keys")
	const key = "sk-braid-sdk-tools"
	os.WriteFile(keyFile, []byte(key+"\n"), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := exec.CommandContext(ctx, bin, "serve", "-m", model, "--listen", "127.0.0.1:0", "-c", "1024", "--parallel", "2",
		"--alias", "stories", "--api-key-file", keyFile, "-t", "2")
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	logDone := make(chan struct{})
	defer func() { cancel(); <-logDone }()
	go func() {
		defer close(logDone)
		re := regexp.MustCompile(`listening on (http://\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log("serve: " + sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		srv.Wait()
	}()
	var url string
	select {
	case url = <-addr:
	case <-ctx.Done():
		t.Fatal("braid serve did not start listening")
	}
	for {
		resp, err := http.Get(url + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatal("braid serve never became ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd := exec.CommandContext(ctx, node, "tools.mjs", url)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+key, "BRAID_MODEL=stories")
	out, err := cmd.CombinedOutput()
	t.Logf("node tools.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the openai SDK tools script failed: %v", err)
	}
}
