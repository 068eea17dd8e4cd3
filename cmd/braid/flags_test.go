package main

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"braid/internal/cluster"
)

const stories = shared + "/models/stories260K/stories260K-F32.gguf"

var seedLine = regexp.MustCompile(`seed (\d+) \(--seed`)

// TestLongFlagNames: llama.cpp's long names work wherever the short ones
// do, and give the same output.
func TestLongFlagNames(t *testing.T) {
	needShared(t, stories)
	short, errS, code := braid(t, "", "run", "-m", stories, "-p", "Once upon a time", "-n", "12", "-c", "64", "-t", "1", "-s", "3",
		"--temp", "0.7", "--top-k", "20", "--top-p", "0.9", "--min-p", "0.1", "-b", "32")
	if code != 0 {
		t.Fatalf("short flags: exit %d: %s", code, errS)
	}
	long, errL, code := braid(t, "", "run", "--model", stories, "--prompt", "Once upon a time", "--n-predict", "12", "--ctx-size", "64",
		"--threads", "1", "--seed", "3", "--temp", "0.7", "--top-k", "20", "--top-p", "0.9", "--min-p", "0.1", "--batch-size=32")
	if code != 0 {
		t.Fatalf("long flags: exit %d: %s", code, errL)
	}
	if short != long || short == "" {
		t.Errorf("short and long flags differ:\n%q\n%q", short, long)
	}
	f := t.TempDir() + "/prompt.txt"
	os.WriteFile(f, []byte("Once upon a time"), 0o644)
	fromFile, errF, code := braid(t, "", "run", "-m", stories, "--file", f, "-n", "12", "-c", "64", "-t", "1", "-s", "3",
		"--temp", "0.7", "--top-k", "20", "--top-p", "0.9", "--min-p", "0.1")
	if code != 0 || fromFile != short {
		t.Errorf("--file: exit %d, %q (want %q): %s", code, fromFile, short, errF)
	}
	if _, e, code := braid(t, "", "run", "-m", stories, "-p", "x", "-f", f); code != 2 || !strings.Contains(e, "not both") {
		t.Errorf("-p with -f: exit %d: %s", code, e)
	}
	if _, e, code := braid(t, "", "inspect", "--model", stories); code != 0 {
		t.Errorf("inspect --model: exit %d: %s", code, e)
	}
	if o, e, code := braid(t, "", "inspect", "-m", stories); code != 0 || !strings.Contains(o, "architecture: llama") {
		t.Errorf("inspect -m: exit %d: %s%s", code, o, e)
	}
}

// TestRandomSeed: without --seed every run draws a seed and prints it;
// giving it back repeats the run.
func TestRandomSeed(t *testing.T) {
	needShared(t, stories)
	args := []string{"run", "-m", stories, "-p", "Once", "-n", "24", "-c", "64", "-t", "1", "--temp", "1.5", "--top-k", "0", "--min-p", "0"}
	seeds := map[string]bool{}
	outs := map[string]bool{}
	var out1, seed1 string
	for i := 0; i < 4; i++ {
		o, e, code := braid(t, "", args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, e)
		}
		m := seedLine.FindStringSubmatch(e)
		if m == nil {
			t.Fatalf("no seed printed:\n%s", e)
		}
		seeds[m[1]], outs[o] = true, true
		if i == 0 {
			out1, seed1 = o, m[1]
		}
	}
	if len(seeds) < 2 || len(outs) < 2 {
		t.Errorf("4 runs gave %d seeds and %d outputs: the default seed is not random", len(seeds), len(outs))
	}
	o, e, _ := braid(t, "", append(args, "--seed", seed1)...)
	if o != out1 {
		t.Errorf("--seed %s did not repeat the run:\n%q\n%q\n%s", seed1, out1, o, e)
	}
	if _, e, code := braid(t, "", append(args, "--seed", "-1")...); code != 0 || seedLine.FindStringSubmatch(e) == nil {
		t.Errorf("--seed -1: exit %d, %s", code, e)
	}
	if _, e, code := braid(t, "", append(args, "--seed", "x")...); code != 2 || !strings.Contains(e, `"x" is not a seed`) {
		t.Errorf("--seed x: exit %d, %s", code, e)
	}
}

// TestGenerationLimits: -n -1 runs to the end of the context and says so;
// an empty prompt starts from BOS; values out of range are refused or
// warned about with the numbers.
func TestGenerationLimits(t *testing.T) {
	needShared(t, stories)
	_, e, code := braid(t, "", "run", "-m", stories, "-p", "Once", "-n", "-1", "-c", "32", "--temp", "0")
	if code != 0 || !strings.Contains(e, "stopped at a full context: 2 prompt + 30 generated tokens = 32") {
		t.Errorf("-n -1: exit %d:\n%s", code, e)
	}
	_, e, code = braid(t, "", "run", "-m", stories, "-p", "Once", "-n", "100", "-c", "32", "--temp", "0")
	if code != 0 || !strings.Contains(e, "-n 100 does not fit: the context holds 32 tokens (-c) and the prompt takes 2; generating at most 30") {
		t.Errorf("-n past the context: exit %d:\n%s", code, e)
	}
	o, e, code := braid(t, "", "run", "-m", stories, "-p", "", "-n", "8", "--temp", "0")
	if code != 0 || !strings.Contains(e, "prompt 1 tokens") || strings.TrimSpace(o) == "" {
		t.Errorf("-p \"\": exit %d: %q\n%s", code, o, e)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-p", "x", "-n", "-2"}, "-n -2: give a number of tokens, or -1"},
		{[]string{"-p", "x", "-c", "-5"}, "-c -5: the context cannot be negative"},
		{[]string{"-p", "x", "-b", "0"}, "-b 0: a step needs at least one token"},
		{[]string{"-p", "x", "-t", "0"}, "-t 0: need at least one thread"},
		{[]string{"-n", "3"}, "-p TEXT or -f FILE is required"},
		{[]string{"-p", "x", "--system", "be brief"}, "--system needs --chat"},
		{[]string{"-p", "Once", "upon", "a", "time"}, `unexpected argument "upon" (braid run takes flags only; quote a prompt with spaces: -p "upon a time")`},
		{[]string{"-p", "x", "--top-p", "1.5"}, "top_p"},
	} {
		_, e, code := braid(t, "", append([]string{"run", "-m", stories}, c.args...)...)
		if code != 2 || !strings.Contains(e, c.want) {
			t.Errorf("run %v: exit %d, want 2 and %q:\n%s", c.args, code, c.want, e)
		}
	}
	_, e, code = braid(t, "", "run", "-m", stories, "-p", "x", "-n", "2", "-c", "1000")
	if code != 0 || !strings.Contains(e, "-c 1000 is past the 128 tokens llama was trained on") {
		t.Errorf("-c past the training context: exit %d:\n%s", code, e)
	}
	for _, args := range [][]string{{"bench", "-m", stories, "extra"}, {"doctor", "now"}, {"serve", "-m", stories, "x"}} {
		if _, e, code := braid(t, "", args...); code != 2 || !strings.Contains(e, "unexpected argument") {
			t.Errorf("%v: exit %d: %s", args, code, e)
		}
	}
}

func TestVersion(t *testing.T) {
	a, _, c1 := braid(t, "", "--version")
	b, _, c2 := braid(t, "", "version")
	if c1 != 0 || c2 != 0 || a != b || !strings.HasPrefix(a, "braid ") || !strings.Contains(a, "go1.") {
		t.Errorf("--version %d %q, version %d %q", c1, a, c2, b)
	}
}

// TestHelpDefaults: defaults print as written, and both names of a flag
// show.
func TestHelpDefaults(t *testing.T) {
	_, e, code := braid(t, "", "run", "-h")
	if code != 0 {
		t.Fatalf("run -h: exit %d", code)
	}
	for _, want := range []string{"(default 0.05)", "(default 0.95)", "(default 0.8)", "-m, --model", "-n, --n-predict", "-c, --ctx-size", "-s, --seed", "-f, --file", "-b, --batch-size", "-t, --threads", "-p, --prompt"} {
		if !strings.Contains(e, want) {
			t.Errorf("run -h lacks %q:\n%s", want, e)
		}
	}
	if strings.Contains(e, "0.0500000") || strings.Contains(e, "0.9499999") {
		t.Errorf("run -h prints float32 defaults as float64:\n%s", e)
	}
	_, e, _ = braid(t, "", "serve", "-h")
	for _, want := range []string{"-np, --parallel", "--host", "--port", "--listen"} {
		if !strings.Contains(e, want) {
			t.Errorf("serve -h lacks %q", want)
		}
	}
	_, e, _ = braid(t, "", "bench", "-h")
	for _, want := range []string{"-p, --n-prompt", "-n, --n-gen", "-r, --repetitions"} {
		if !strings.Contains(e, want) {
			t.Errorf("bench -h lacks %q", want)
		}
	}
}

// TestHelpListsREADMEFlags: every flag the README's Commands section gives
// a command is in that command's help.
func TestHelpListsREADMEFlags(t *testing.T) {
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flagRe := regexp.MustCompile(`(?:^|[\s\[|(])(--?[a-z][a-z0-9-]*)`)
	want := map[string]map[string]bool{} // command -> flags
	var cur string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Commands"
			continue
		}
		if !in {
			continue
		}
		s := strings.TrimSpace(line)
		if strings.HasPrefix(s, "braid ") {
			fields := strings.Fields(s)
			cur = fields[1]
			if len(fields) > 2 && fields[2] == "serve" && cur == "bench" {
				cur = "bench serve"
			}
			// the synopsis, not the description after it
			if i := strings.Index(s, "   "); i > 0 {
				s = s[:i]
			}
		} else if !strings.HasPrefix(s, "[") || cur == "" {
			if s == "" || !strings.HasPrefix(line, "      ") {
				cur = ""
			}
			continue
		}
		if want[cur] == nil {
			want[cur] = map[string]bool{}
		}
		for _, m := range flagRe.FindAllStringSubmatch(s, -1) {
			want[cur][m[1]] = true
		}
	}
	if len(want) < 10 {
		t.Fatalf("read the synopses of only %d commands from the README", len(want))
	}
	for cmd, flags := range want {
		_, help, code := braid(t, "", append(strings.Fields(cmd), "-h")...)
		if code != 0 {
			t.Errorf("braid %s -h: exit %d", cmd, code)
			continue
		}
		for fl := range flags {
			name := strings.TrimLeft(fl, "-")
			re := regexp.MustCompile(`(?m)(^|, )\s*-{1,2}` + regexp.QuoteMeta(name) + `(\s|,|$)`)
			if !re.MatchString(help) {
				t.Errorf("the README gives braid %s %s, its help does not list it", cmd, fl)
			}
		}
	}
}

// TestServeHostPort: llama-server's --host and --port set the address.
func TestServeHostPort(t *testing.T) {
	needShared(t, stories)
	cmd := exec.Command(braidBin, "serve", "-m", stories, "--host", "127.0.0.1", "--port", "0", "-c", "64", "--parallel", "1")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := regexp.MustCompile(`listening on http://(127\.0\.0\.1:\d+)`).FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case a := <-found:
		if strings.HasSuffix(a, ":0") {
			t.Errorf("listening on %s", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve --host --port never listened")
	}
	if _, e, code := braid(t, "", "serve", "-m", stories, "--port", "70000"); code != 2 || !strings.Contains(e, "--port 70000") {
		t.Errorf("--port 70000: exit %d: %s", code, e)
	}
	if _, e, code := braid(t, "", "serve", "-m", stories, "--port", "1", "--listen", "127.0.0.1:2"); code != 2 || !strings.Contains(e, "not both") {
		t.Errorf("--port with --listen: exit %d: %s", code, e)
	}
}

// TestREADMEClusterFile: the cluster file the README documents parses, with
// what its comments say.
func TestREADMEClusterFile(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "### The cluster file\n")
	if !ok {
		t.Fatal("the README has no cluster file section")
	}
	var src []string
	in := false
	for _, l := range strings.Split(rest, "\n") {
		switch {
		case strings.HasPrefix(l, "    "):
			in = true
			src = append(src, l[4:])
		case l == "" && in:
			src = append(src, "")
		case in:
			goto done
		}
	}
done:
	f, err := cluster.ParseFile(strings.Join(src, "\n"))
	if err != nil {
		t.Fatalf("the README's cluster file: %v\n%s", err, strings.Join(src, "\n"))
	}
	if f.Split != "tensor" || len(f.Ranks) != 3 || f.Ranks[1].Addr != "10.0.1.2:7000" || f.Links[[2]int{1, 2}] != "10.0.3.3" ||
		len(f.TensorSplit) != 3 || f.Timeout != "30s" || f.Model != "/models/m.gguf" || f.Ranks[0].Model != "/data/m.gguf" {
		t.Errorf("parsed as %+v", f)
	}
}
