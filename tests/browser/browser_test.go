// Package browser tests braid serve's web page in a real headless Chromium,
// driven through the DevTools protocol (chromedp): the page loads with no
// console errors, a chat message streams in (its reasoning shown apart
// when the model reasons), and the cluster view shows the ranks of a real
// two-worker cluster with their step times. It is a module of its own so
// that chromedp is no dependency of braid. Chromium comes from Debian's
// packages (.ci/run installs it); without one the test skips, or fails
// under BRAID_REQUIRE_BROWSER=1.
//
// BRAID_SCREENSHOTS=DIR writes the README's screenshots there.
package browser

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

const model = "../../../shared/testdata/models/stories260K/stories260K-F32.gguf"

func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("BRAID_REQUIRE_BROWSER") == "1" {
		t.Fatal("no Chromium on PATH (apt-get install chromium) and BRAID_REQUIRE_BROWSER=1")
	}
	t.Skip("no Chromium on PATH (apt-get install chromium): skipping the browser test")
	return ""
}

// proc is a braid process with its stderr kept.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	errb strings.Builder
}

func (p *proc) stderr() string { p.mu.Lock(); defer p.mu.Unlock(); return p.errb.String() }

// start runs braid and returns the first match of re in its output (stdout
// or stderr, whichever says it).
func start(t *testing.T, bin string, re *regexp.Regexp, args ...string) (*proc, string) {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...)}
	stdout, _ := p.cmd.StdoutPipe()
	stderr, _ := p.cmd.StderrPipe()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	found := make(chan string, 2)
	scan := func(r io.Reader, keep bool) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if keep {
				p.mu.Lock()
				p.errb.WriteString(sc.Text() + "\n")
				p.mu.Unlock()
			}
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}
	go scan(stdout, false)
	go scan(stderr, true)
	select {
	case s := <-found:
		return p, s
	case <-time.After(60 * time.Second):
		t.Fatalf("braid %v: no %v: %s", args, re, p.stderr())
	}
	return nil, ""
}

func TestWebPage(t *testing.T) {
	chrome := chromium(t)
	if _, err := os.Stat(model); err != nil {
		if os.Getenv("BRAID_REQUIRE_TESTDATA") == "1" {
			t.Fatalf("shared test model absent: %v", err)
		}
		t.Skipf("shared test model absent (%v): skipping", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "braid")
	build := exec.Command("go", "build", "-o", bin, "./cmd/braid")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building braid: %v\n%s", err, out)
	}
	// A real cluster: this node and two workers, split by layers.
	workerRe := regexp.MustCompile(`braid worker listening on (\S+)`)
	_, w1 := start(t, bin, workerRe, "worker", "--listen", "127.0.0.1:0", "-t", "1")
	_, w2 := start(t, bin, workerRe, "worker", "--listen", "127.0.0.1:0", "-t", "1")
	srv, addr := start(t, bin, regexp.MustCompile(`listening on http://(\S+)`), "serve", "-m", model, "--listen", "127.0.0.1:0",
		"-c", "256", "--parallel", "2", "-t", "1", "--workers", w1+","+w2, "--split", "layer", "--alias", "stories")
	base := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; {
		resp, err := http.Get(base + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never became ready: %s", srv.stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.Flag("headless", "new"), chromedp.WindowSize(1280, 800), chromedp.Flag("disable-gpu", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelT()

	// Every console error, uncaught exception and failed load is a failure.
	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, (&chromedp.ExceptionError{ExceptionDetails: e.ExceptionDetails}).Error())
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
				problems = append(problems, fmt.Sprintf("log %s: %s %s", e.Entry.Level, e.Entry.Text, e.Entry.URL))
			}
		}
	}); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	checkProblems := func(when string) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) > 0 {
			t.Errorf("%s: the browser reported: %s", when, strings.Join(problems, "\n"))
			problems = nil
		}
	}
	shots := os.Getenv("BRAID_SCREENSHOTS")
	shot := func(name string) {
		if shots == "" {
			return
		}
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Errorf("screenshot %s: %v", name, err)
			return
		}
		if err := os.WriteFile(filepath.Join(shots, name), buf, 0o644); err != nil {
			t.Error(err)
		}
	}
	text := func(sel string) string {
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	poll := func(expr string, d time.Duration) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(50*time.Millisecond))
	}

	// The chat: a message streams in and the stats line says how much.
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("input")),
		poll(`document.getElementById("model").textContent === "stories" && document.getElementById("health").textContent === "ready"`, 20*time.Second),
		chromedp.SetValue(chromedp.ID("temperature"), "0"),
		chromedp.SetValue(chromedp.ID("max_tokens"), "40"),
		chromedp.SendKeys(chromedp.ID("input"), "Once upon a time"),
		chromedp.Click(chromedp.ID("send")),
		poll(`document.querySelectorAll(".msg.assistant").length === 1 && document.getElementById("stats").textContent.includes("tokens")`, 60*time.Second),
	)
	if err != nil {
		t.Fatalf("chat: %v\nserve: %s", err, srv.stderr())
	}
	shot("web-chat.png")
	reply, stats := text(".msg.assistant .content"), text("#stats")
	// The page's reply is the API's greedy reply to the same messages.
	want := chatReply(t, base, `{"model":"stories","messages":[{"role":"user","content":"Once upon a time"}],"temperature":0,"max_tokens":40,"top_p":0.95,"top_k":40,"min_p":0.05}`)
	if reply != want || reply == "" {
		t.Errorf("the page shows %q, the API answers %q", reply, want)
	}
	if !regexp.MustCompile(`^\d+ tokens, first after \d+ ms`).MatchString(stats) {
		t.Errorf("stats line %q", stats)
	}
	checkProblems("the chat")

	// The cluster view: three ranks with their addresses and layers, and
	// step times once a generation ran between two refreshes.
	stop := make(chan struct{})
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		for {
			select {
			case <-stop:
				return
			default:
			}
			chatReply(t, base, `{"model":"stories","messages":[{"role":"user","content":"Tell me a story."}],"max_tokens":60}`)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("tab-cluster")),
		poll(`document.querySelectorAll("#ranks tbody tr").length === 3`, 20*time.Second),
		poll(`[...document.querySelectorAll("#ranks tbody tr")].every(r => /^\d+\.\d+ (µs|ms|s)$/.test(r.cells[4].textContent))`, 30*time.Second),
	)
	close(stop)
	<-busy
	rows, rerr := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#ranks tbody tr")].map(r => [...r.cells].map(c => c.textContent).join(" | "))`))
	if err != nil || rerr != nil {
		t.Fatalf("cluster view: %v %v (rows %q)\nserve: %s", err, rerr, rows, srv.stderr())
	}
	shot("web-cluster.png")
	t.Logf("cluster view:\n%s", strings.Join(rows, "\n"))
	for i, want := range []string{"0 | local | layers 0–", "1 | " + w1 + " | layers ", "2 | " + w2 + " | layers "} {
		if len(rows) <= i || !strings.HasPrefix(rows[i], want) {
			t.Errorf("rank %d row %q, want it to start %q", i, rows, want)
		}
	}
	checkProblems("the cluster view")

	// Reasoning: through a proxy whose chat endpoint answers as a reasoning
	// model streams, the page shows the reasoning apart from the answer.
	target, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			proxy.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, d := range []string{`{"role":"assistant","content":""}`, `{"reasoning_content":"The user says hi."}`, `{"reasoning_content":" Greet back."}`, `{"content":"Hello"}`, `{"content":"!"}`} {
			fmt.Fprintf(w, "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", d)
			fl.Flush()
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Fprint(w, "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":6}}\n\ndata: [DONE]\n\n")
	}))
	defer fake.Close()
	err = chromedp.Do(ctx,
		chromedp.Navigate(fake.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("input")),
		chromedp.SendKeys(chromedp.ID("input"), "Hi"),
		chromedp.Click(chromedp.ID("send")),
		poll(`document.getElementById("stats").textContent.includes("(stop)")`, 20*time.Second),
	)
	if err != nil {
		t.Fatalf("reasoning: %v", err)
	}
	shot("web-reasoning.png")
	thought, answer := text(".msg.assistant .reasoning"), text(".msg.assistant .content")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("show_reasoning"))); err != nil {
		t.Fatal(err)
	}
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`getComputedStyle(document.querySelector(".msg.assistant .reasoning")).display === "none"`))
	if err != nil {
		t.Fatal(err)
	}
	if thought != "The user says hi. Greet back." || answer != "Hello!" || !hidden {
		t.Errorf("reasoning %q, answer %q, hidden after unticking %v", thought, answer, hidden)
	}
	checkProblems("the reasoning reply")
}

// chatReply is the API's reply text.
func chatReply(t *testing.T, base, body string) string {
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return ""
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`"content":"((?:[^"\\]|\\.)*)"`).FindSubmatch(data)
	if m == nil {
		t.Errorf("no reply in %s", data)
		return ""
	}
	var s string
	fmt.Sscanf(`"`+string(m[1])+`"`, "%q", &s)
	return s
}
