//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pty is a pseudo-terminal: braid chat runs on its slave side, the test
// types into and reads from the master as a person at a terminal would.
type pty struct {
	t      *testing.T
	master *os.File
	mu     sync.Mutex
	out    strings.Builder
	seen   int // how much of out the last expect consumed
}

func openPTY(t *testing.T) (*pty, *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &pty{t: t, master: m}
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := m.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:k])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { m.Close(); s.Close() })
	return p, s
}

// startChat runs braid chat with the pty as its controlling terminal, so
// that a typed Ctrl-C is a SIGINT to it.
func startChat(t *testing.T, args ...string) (*pty, *exec.Cmd) {
	t.Helper()
	p, slave := openPTY(t)
	cmd := exec.Command(braidBin, append([]string{"chat"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return p, cmd
}

func (p *pty) typeText(s string) {
	if _, err := p.master.WriteString(s); err != nil {
		p.t.Fatal(err)
	}
}

// expect waits for re in what the terminal shows after the last match and
// returns the text up to and including the match.
func (p *pty) expect(re string, d time.Duration) string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(d)
	for {
		p.mu.Lock()
		s := p.out.String()[p.seen:]
		if loc := rx.FindStringIndex(s); loc != nil {
			p.seen += loc[1]
			p.mu.Unlock()
			return s[:loc[1]]
		}
		p.mu.Unlock()
		if time.Now().After(deadline) {
			p.t.Fatalf("no %q on the terminal within %v; it shows:\n%s", re, d, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitExit(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("braid chat exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("braid chat did not exit")
	}
}

// TestChatTerminal drives braid chat through a pseudo-terminal: answers
// stream with the model's template, /reset and /exit work, Ctrl-C at the
// prompt says how to quit and Ctrl-C during an answer stops only it.
func TestChatTerminal(t *testing.T) {
	needShared(t, stories)
	// What braid run prints for the same first turn, greedy.
	want, e, code := braid(t, "", "run", "-m", stories, "--chat", "-p", "Once upon a time", "-n", "24", "--temp", "0")
	if code != 0 {
		t.Fatalf("run --chat: %s", e)
	}
	want = strings.TrimSpace(want)

	p, cmd := startChat(t, "-m", stories, "--temp", "0", "-n", "24")
	p.expect(`Ctrl-C stops an answer\r?\n> $`, 30*time.Second)
	p.typeText("Once upon a time\r")
	// the echo of the line, the answer, the stats line
	got := strings.ReplaceAll(p.expect(`tok/s, first after \d+ ms\r?\n> $`, 30*time.Second), "\r\n", "\n")
	if !regexp.MustCompile(`^Once upon a time\n` + regexp.QuoteMeta(want) + `\n24 tokens, [\d.]+ tok/s, first after \d+ ms\n> $`).MatchString(got) {
		t.Errorf("the first turn shows %q; braid run --chat answers %q", got, want)
	}
	// the second turn is answered with the first in its prompt: it
	// differs from the same line asked first
	p.typeText("Once upon a time\r")
	second := strings.ReplaceAll(p.expect(`tok/s, first after \d+ ms\r?\n> $`, 30*time.Second), "\r\n", "\n")
	if strings.Contains(second, want) {
		t.Errorf("the second turn repeats the first answer: the history is not in its prompt:\n%s", second)
	}
	p.typeText("/reset\r")
	p.expect(`\(the conversation starts over\)\r?\n> $`, 10*time.Second)
	p.typeText("Once upon a time\r")
	again := strings.ReplaceAll(p.expect(`tok/s, first after \d+ ms\r?\n> $`, 30*time.Second), "\r\n", "\n")
	if !strings.Contains(again, want) {
		t.Errorf("after /reset the first line is not answered as at first:\n%s", again)
	}
	p.typeText("\x03") // Ctrl-C at the prompt
	p.expect(`\(/reset starts the conversation over, /exit \(or Ctrl-D\) quits; Ctrl-C stops an answer\)\r?\n> $`, 10*time.Second)
	p.typeText("/exit\r")
	waitExit(t, cmd)

	// Ctrl-C while an answer is written stops it, and the chat goes on.
	p, cmd = startChat(t, "-m", stories, "--temp", "1.5", "--top-k", "0", "--min-p", "0", "-c", "8192")
	p.expect(`Ctrl-C stops an answer\r?\n> $`, 30*time.Second)
	stopped := false
	for try := 0; try < 5 && !stopped; try++ {
		p.typeText("Tell me a long story\r")
		p.expect(`long story\r?\n.{8}`, 30*time.Second) // the answer is coming
		p.typeText("\x03")
		s := p.expect(`tok/s, first after \d+ ms\r?\n> $`, 30*time.Second)
		stopped = strings.Contains(s, "(stopped)")
	}
	if !stopped {
		t.Fatal("five answers ended before Ctrl-C could stop them")
	}
	// and the chat goes on
	p.typeText("/reset\r")
	p.expect(`\(the conversation starts over\)\r?\n> $`, 10*time.Second)
	p.typeText("\x04") // Ctrl-D
	waitExit(t, cmd)
}
