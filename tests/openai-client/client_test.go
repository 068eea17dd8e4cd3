// Package openaiclient tests braid serve with the official openai npm
// package: the real binary, the real SDK.
package openaiclient

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"braid/internal/sharedtest"
)

const model = "../../../shared/testdata/models/stories260K/stories260K-F32.gguf"

func TestOpenAINodeSDK(t *testing.T) {
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
	const key = "sk-braid-sdk-test"
	os.WriteFile(keyFile, []byte(key+"\n"), 0o600)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := exec.CommandContext(ctx, bin, "serve", "-m", model, "--listen", "127.0.0.1:0", "-c", "512", "--parallel", "2",
		"--alias", "stories", "--api-key-file", keyFile, "-t", "2")
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	addr := make(chan string, 1)
	logDone := make(chan struct{})
	// The server dies with ctx; wait for its log reader before the test
	// returns, so nothing logs after it.
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
		exited <- srv.Wait()
	}()
	var url string
	select {
	case url = <-addr:
	case err := <-exited:
		t.Fatalf("braid serve exited before listening: %v", err)
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

	cmd := exec.CommandContext(ctx, node, "script.mjs", url)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+key, "BRAID_MODEL=stories")
	out, err := cmd.CombinedOutput()
	t.Logf("node script.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the openai SDK script failed: %v", err)
	}

	// SIGTERM: a clean exit.
	srv.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("braid serve after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("braid serve did not exit after SIGTERM")
	}
}
