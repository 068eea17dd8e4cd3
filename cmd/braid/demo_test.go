package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoCmd is `braid demo args...` with its own cache directory.
func demoCmd(t *testing.T, cache string, args ...string) *exec.Cmd {
	cmd := exec.Command(braidBin, append([]string{"demo"}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache)
	return cmd
}

// TestDemo runs the README's main command end to end: doctor, the random
// model written once into the cache, two real worker processes, and the
// same tokens on one node, with --split tensor and with --split layer.
func TestDemo(t *testing.T) {
	cache := t.TempDir()
	for i, wantModel := range []string{"== wrote a random-weight llama model", "from the cache"} {
		var o, e bytes.Buffer
		cmd := demoCmd(t, cache)
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("run %d: %v\n%s%s", i, err, o.String(), e.String())
		}
		out := o.String()
		for _, want := range []string{"== braid doctor", "kernels:", wantModel, "== started 2 workers", "tokens identical: yes, all 32 tokens in all 3 runs"} {
			if !strings.Contains(out, want) {
				t.Errorf("run %d: demo output lacks %q:\n%s", i, want, out)
			}
		}
		// The three rows show the same tokens (checked here too, not only
		// by the demo's own verdict).
		rows := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			for _, name := range []string{"one node", "--split tensor", "--split layer"} {
				if strings.HasPrefix(line, name+" ") {
					f := strings.Fields(strings.TrimPrefix(line, name))
					if len(f) < 6 {
						t.Fatalf("short row %q", line)
					}
					if name != "one node" && !strings.HasSuffix(f[4], "%") {
						t.Errorf("%s: no communication share in %q", name, line)
					}
					rows[name] = strings.Join(f[5:], " ")
				}
			}
		}
		if len(rows) != 3 || rows["one node"] == "" || rows["--split tensor"] != rows["one node"] || rows["--split layer"] != rows["one node"] {
			t.Errorf("run %d: token columns differ or are missing: %q", i, rows)
		}
	}
}

// TestDemoEndsItsWorkers: the demo's workers end when it ends, also when
// it is interrupted (Ctrl-C) or killed outright.
func TestDemoEndsItsWorkers(t *testing.T) {
	cache := t.TempDir()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		cmd := demoCmd(t, cache, "-n", "400")
		var e bytes.Buffer
		cmd.Stderr = &e
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pids := make(chan []int, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "== started 2 workers") {
					var ps []int
					for _, m := range regexp.MustCompile(`pid (\d+)`).FindAllStringSubmatch(sc.Text(), -1) {
						p, _ := strconv.Atoi(m[1])
						ps = append(ps, p)
					}
					pids <- ps
				}
			}
			close(pids)
		}()
		var ps []int
		select {
		case ps = <-pids:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("the demo never said it started its workers: %s", e.String())
		}
		if len(ps) != 2 {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%v: the demo named workers %v: %s", sig, ps, e.String())
		}
		cmd.Process.Signal(sig)
		cmd.Wait()
		for _, p := range ps {
			deadline := time.Now().Add(20 * time.Second)
			for alive(p) {
				if time.Now().After(deadline) {
					syscall.Kill(p, syscall.SIGKILL)
					t.Fatalf("after %v to the demo, its worker (pid %d) still runs", sig, p)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// alive reports whether pid runs (a zombie, ended but not yet reaped, does
// not count).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil { // no /proc entry: gone (or no /proc: ask the kernel)
		return !os.IsNotExist(err) && syscall.Kill(pid, 0) == nil
	}
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}
