// Package servetest runs the real braid binary's `serve` for the tests that
// drive it with client software (tests/openai-client, tests/js-clients):
// build it, start it on a free loopback port, wait until it is ready, stop
// it with the test.
package servetest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build compiles braid into the test's temporary directory and returns
// the binary's path.
func Build(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "braid")
	if out, err := exec.Command("go", "build", "-o", bin, "braid/cmd/braid").CombinedOutput(); err != nil {
		t.Fatalf("building braid: %v\n%s", err, out)
	}
	return bin
}

// Server is a running `braid serve`.
type Server struct {
	URL    string
	cmd    *exec.Cmd
	exited chan error
	done   chan struct{}

	mu  sync.Mutex
	log []string
}

// Start runs `bin serve --listen 127.0.0.1:0 args...` until ctx ends or
// the test does, and returns once its /ready answers 200 (within
// timeout). Its log lines go to the test's log.
func Start(t testing.TB, ctx context.Context, timeout time.Duration, bin string, args ...string) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Server{cmd: cmd, exited: make(chan error, 1), done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(s.done)
		re := regexp.MustCompile(`listening on (http://\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.log = append(s.log, sc.Text())
			s.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		s.exited <- cmd.Wait()
	}()
	// The server dies with the test; its log reader is waited for, so
	// nothing is logged after the test returns.
	t.Cleanup(func() {
		cancel()
		<-s.done
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, l := range s.log {
			t.Log("serve: " + l)
		}
	})
	deadline := time.After(timeout)
	select {
	case s.URL = <-addr:
	case err := <-s.exited:
		t.Fatalf("braid serve exited before listening: %v", err)
	case <-deadline:
		t.Fatal("braid serve did not start listening")
	}
	for {
		resp, err := http.Get(s.URL + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		select {
		case <-deadline:
			t.Fatal("braid serve never became ready")
		case err := <-s.exited:
			t.Fatalf("braid serve exited before it was ready: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Terminate sends SIGTERM and returns the exit's error, or an error of its
// own when the server does not exit within timeout.
func (s *Server) Terminate(timeout time.Duration) error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("braid serve did not exit within %v of SIGTERM", timeout)
	}
}
