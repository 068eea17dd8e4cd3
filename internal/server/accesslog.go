package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// AccessEntry is one request as the access log records it.
type AccessEntry struct {
	Time     time.Time
	Method   string
	Path     string
	Status   int
	Remote   string
	Duration time.Duration
	// PromptTokens and CompletionTokens are -1 for a request that
	// generated nothing.
	PromptTokens, CompletionTokens int
}

// Text is the entry as one line for people.
func (e AccessEntry) Text() string {
	toks := "-"
	if e.PromptTokens >= 0 {
		toks = fmt.Sprintf("%d+%d tokens", e.PromptTokens, e.CompletionTokens)
	}
	return fmt.Sprintf("%s %s %d %s %.1f ms %s", e.Method, e.Path, e.Status, toks, float64(e.Duration.Microseconds())/1000, e.Remote)
}

// JSON is the entry as one JSON object for machines.
func (e AccessEntry) JSON() string {
	m := map[string]any{
		"time": e.Time.UTC().Format(time.RFC3339Nano), "msg": "request", "method": e.Method, "path": e.Path,
		"status": e.Status, "remote": e.Remote, "duration_ms": float64(e.Duration.Microseconds()) / 1000,
	}
	if e.PromptTokens >= 0 {
		m["prompt_tokens"], m["completion_tokens"] = e.PromptTokens, e.CompletionTokens
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// quietPaths are polled (by Prometheus, load balancers, the web page): a
// successful GET of one is not logged.
var quietPaths = map[string]bool{"/health": true, "/ready": true, "/metrics": true, "/cluster": true, "/slots": true, "/props": true}

type tokenNote struct {
	mu               sync.Mutex
	prompt, complete int
	set              bool
}

type tokenNoteKey struct{}

// noteTokens records a request's token counts for its access-log line.
func noteTokens(ctx context.Context, prompt, completion int) {
	if n, ok := ctx.Value(tokenNoteKey{}).(*tokenNote); ok {
		n.mu.Lock()
		n.prompt, n.complete, n.set = prompt, completion, true
		n.mu.Unlock()
	}
}

// usageSniffer keeps the tail of a response, whose last "usage" object
// gives the token counts of the OpenAI endpoints.
type usageSniffer struct {
	*statusWriter
	tail []byte
}

const sniffTail = 1024

func (u *usageSniffer) Write(b []byte) (int, error) {
	if len(b) >= sniffTail {
		u.tail = append(u.tail[:0], b[len(b)-sniffTail:]...)
	} else {
		u.tail = append(u.tail, b...)
		if len(u.tail) > 2*sniffTail {
			u.tail = append(u.tail[:0], u.tail[len(u.tail)-sniffTail:]...)
		}
	}
	return u.statusWriter.Write(b)
}

var usageRe = regexp.MustCompile(`"(?:prompt|input)_tokens":(\d+),"(?:completion|output)_tokens":(\d+)`)

func (u *usageSniffer) usage() (int, int, bool) {
	if !bytes.Contains(u.tail, []byte("_tokens")) {
		return 0, 0, false
	}
	all := usageRe.FindAllSubmatch(u.tail, -1)
	if len(all) == 0 {
		return 0, 0, false
	}
	m := all[len(all)-1]
	p, _ := strconv.Atoi(string(m[1]))
	c, _ := strconv.Atoi(string(m[2]))
	return p, c, true
}

// serveLogged runs the request through h and writes its access-log line.
func (s *Server) serveLogged(h http.Handler, rec *statusWriter, r *http.Request) {
	if s.cfg.AccessLog == nil {
		h.ServeHTTP(rec, r)
		return
	}
	start := time.Now()
	note := &tokenNote{}
	r = r.WithContext(context.WithValue(r.Context(), tokenNoteKey{}, note))
	u := &usageSniffer{statusWriter: rec}
	h.ServeHTTP(u, r)
	if r.Method == http.MethodGet && rec.status < 400 && quietPaths[r.URL.Path] {
		return
	}
	e := AccessEntry{Time: start, Method: r.Method, Path: r.URL.Path, Status: rec.status, Remote: r.RemoteAddr,
		Duration: time.Since(start), PromptTokens: -1, CompletionTokens: -1}
	note.mu.Lock()
	if note.set {
		e.PromptTokens, e.CompletionTokens = note.prompt, note.complete
	} else if p, c, ok := u.usage(); ok {
		e.PromptTokens, e.CompletionTokens = p, c
	}
	note.mu.Unlock()
	s.cfg.AccessLog(e)
}
