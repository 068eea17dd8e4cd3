package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultEndpoint is the hub asked when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Client talks to a Hugging Face-compatible hub.
type Client struct {
	// Endpoint is the hub's base URL (HF_ENDPOINT).
	Endpoint string
	// Token is sent as a bearer token to the hub, never to the hosts it
	// redirects downloads to (HF_TOKEN, or the token file).
	Token string
	// HTTP makes the requests (a client with sane timeouts when nil).
	HTTP *http.Client
	// Connections is how many ranged requests fetch one file at once
	// (default 4).
	Connections int
	// ChunkSize is the bytes of one ranged request (0: chosen from the file
	// size and Connections, 8 to 64 MiB).
	ChunkSize int64
	// Retries is how many times a failed request (429, 5xx, a broken
	// connection) is tried again before the download fails (default 8).
	Retries int
	// Backoff is the first wait before a retry, doubled each time up to
	// 30 s (default 1 s); a Retry-After header overrides it (up to
	// MaxRetryAfter).
	Backoff time.Duration
	// MaxRetryAfter caps the wait a Retry-After header may ask for
	// (default 5 minutes).
	MaxRetryAfter time.Duration
	// Stall ends a connection that delivers no byte for this long (it is
	// retried; default 60 s).
	Stall time.Duration
	// Offline refuses every request (HF_HUB_OFFLINE=1).
	Offline bool
	// Progress, when set, receives the bytes of every download as they
	// arrive.
	Progress *Progress
	// Logf, when set, is told of retries and waits.
	Logf func(format string, a ...any)
}

// NewClient reads the Hugging Face tools' environment: HF_ENDPOINT,
// HF_TOKEN (else the token file: HF_TOKEN_PATH, or $HF_HOME/token),
// HF_HUB_OFFLINE.
func NewClient() *Client {
	c := &Client{Endpoint: os.Getenv("HF_ENDPOINT"), Token: strings.TrimSpace(os.Getenv("HF_TOKEN"))}
	if c.Token == "" {
		if b, err := os.ReadFile(tokenPath()); err == nil {
			c.Token = strings.TrimSpace(string(b))
		}
	}
	switch strings.ToLower(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "true", "yes", "on":
		c.Offline = true
	}
	return c
}

// tokenPath is where `hf auth login` stores the token.
func tokenPath() string {
	if p := os.Getenv("HF_TOKEN_PATH"); p != "" {
		return p
	}
	return filepath.Join(hfHome(), "token")
}

// hfHome is $HF_HOME, else $XDG_CACHE_HOME/huggingface, else
// ~/.cache/huggingface.
func hfHome() string {
	if h := os.Getenv("HF_HOME"); h != "" {
		return h
	}
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "huggingface")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "huggingface")
	}
	return filepath.Join(home, ".cache", "huggingface")
}

func (c *Client) endpoint() string {
	e := strings.TrimRight(c.Endpoint, "/")
	if e == "" {
		return DefaultEndpoint
	}
	return e
}

func (c *Client) connections() int {
	if c.Connections <= 0 {
		return 4
	}
	return c.Connections
}

func (c *Client) retries() int {
	if c.Retries == 0 {
		return 8
	}
	return max(c.Retries, 0)
}

func (c *Client) backoff(attempt int) time.Duration {
	b := c.Backoff
	if b <= 0 {
		b = time.Second
	}
	d := b << min(attempt, 10)
	d = min(d, 30*time.Second)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1)) // jitter: two clients never retry in lockstep
}

func (c *Client) maxRetryAfter() time.Duration {
	if c.MaxRetryAfter <= 0 {
		return 5 * time.Minute
	}
	return c.MaxRetryAfter
}

func (c *Client) stall() time.Duration {
	if c.Stall <= 0 {
		return 60 * time.Second
	}
	return c.Stall
}

// httpClient is c.HTTP, or a default one, with redirects that drop the
// token when they leave the hub's host (downloads go to a CDN with signed
// URLs; the token is for the hub only).
func (c *Client) httpClient() *http.Client {
	base := c.HTTP
	if base == nil {
		base = defaultHTTP
	}
	hc := *base
	hubHost := ""
	if u, err := url.Parse(c.endpoint()); err == nil {
		hubHost = u.Host
	}
	prev := base.CheckRedirect
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return fmt.Errorf("stopped after 10 redirects")
		}
		if req.URL.Host != hubHost {
			req.Header.Del("Authorization")
		}
		if prev != nil {
			return prev(req, via)
		}
		return nil
	}
	return &hc
}

var defaultHTTP = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	ForceAttemptHTTP2:     false, // one TCP connection per ranged request, so they run in parallel
	MaxIdleConns:          64,
	MaxIdleConnsPerHost:   32,
	IdleConnTimeout:       90 * time.Second,
	TLSHandshakeTimeout:   30 * time.Second,
	ResponseHeaderTimeout: 60 * time.Second,
	ExpectContinueTimeout: time.Second,
}}

// newRequest builds a request to the hub, with the token when there is one.
func (c *Client) newRequest(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "braid")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// StatusError is a hub's refusal: the HTTP status, and the X-Error-Code and
// X-Error-Message headers the Hugging Face hub sets.
type StatusError struct {
	URL     string
	Status  int
	Code    string // RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo, ...
	Message string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s: HTTP %d", e.URL, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// retryable says whether a response status is worth another try.
func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500
}

func statusError(resp *http.Response) *StatusError {
	e := &StatusError{URL: resp.Request.URL.Redacted(), Status: resp.StatusCode, Code: resp.Header.Get("X-Error-Code"), Message: resp.Header.Get("X-Error-Message")}
	if i := strings.IndexByte(e.URL, '?'); i >= 0 { // signed CDN URLs: the query is a credential
		e.URL = e.URL[:i]
	}
	if e.Message == "" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		var j struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &j) == nil && j.Error != "" {
			e.Message = j.Error
		}
	}
	return e
}

// retryAfter reads a Retry-After header (seconds, or an HTTP date); 0 when
// there is none.
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// wait is the pause before retry attempt (0-based) after resp (nil for a
// broken connection): its Retry-After, else the backoff.
func (c *Client) wait(attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if d := retryAfter(resp.Header); d > 0 {
			return min(d, c.maxRetryAfter())
		}
	}
	return c.backoff(attempt)
}

// ErrOffline is returned for every request when HF_HUB_OFFLINE is set.
var ErrOffline = errors.New("HF_HUB_OFFLINE is set: not asking the hub")

// get fetches u from the hub, retrying 429, 5xx and broken connections, and
// returns a 200 response (the caller closes its body) or an error.
func (c *Client) get(ctx context.Context, u string) (*http.Response, error) {
	if c.Offline {
		return nil, ErrOffline
	}
	hc := c.httpClient()
	for attempt := 0; ; attempt++ {
		req, err := c.newRequest(ctx, http.MethodGet, u)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			return resp, nil
		}
		if ctx.Err() != nil {
			if resp != nil {
				resp.Body.Close()
			}
			return nil, ctx.Err()
		}
		var fail error
		limit := c.retries()
		if err != nil {
			fail = c.netError(err)
			if fail != err { // no route to the hub at all: say so soon
				limit = min(limit, 2)
			}
		} else {
			se := statusError(resp)
			resp.Body.Close()
			if !retryable(resp.StatusCode) {
				return nil, se
			}
			fail = se
		}
		if attempt >= limit {
			return nil, fmt.Errorf("%w (gave up after %d tries)", fail, attempt+1)
		}
		if err := sleep(ctx, c.wait(attempt, resp)); err != nil {
			return nil, err
		}
	}
}

// netError says which hub could not be reached.
func (c *Client) netError(err error) error {
	var dns *net.DNSError
	var op *net.OpError
	if errors.As(err, &dns) || errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("cannot reach the hub at %s (no network? set HF_ENDPOINT for a mirror): %w", c.endpoint(), err)
	}
	return err
}

// RepoInfo is a repository at one revision: the commit it names and its
// files.
type RepoInfo struct {
	Repo   string
	Commit string
	Files  []File
}

// apiInfo is the part of /api/models/REPO/revision/REV?blobs=true braid
// reads.
type apiInfo struct {
	ID       string `json:"id"`
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
		Size      *int64 `json:"size"`
		LFS       *struct {
			SHA256 string `json:"sha256"`
			Size   int64  `json:"size"`
		} `json:"lfs"`
	} `json:"siblings"`
}

// maxInfo bounds the file list read from a hub (a repository with many
// thousands of files stays well below).
const maxInfo = 64 << 20

// ParseInfo reads a hub's model info (the JSON of
// /api/models/REPO/revision/REV?blobs=true). It refuses a listing whose
// commit is not a hash, or with a file path that would leave the snapshot
// folder, a negative size, or an LFS hash that is not a SHA-256.
func ParseInfo(data []byte) (*RepoInfo, error) {
	var a apiInfo
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("model info is not the hub's JSON: %w", err)
	}
	commit := strings.ToLower(a.SHA)
	if !isCommit(commit) {
		return nil, fmt.Errorf("model info: commit %q is not a 40-digit hash", a.SHA)
	}
	info := &RepoInfo{Repo: a.ID, Commit: commit}
	seen := map[string]bool{}
	for i, s := range a.Siblings {
		if err := checkRepoPath(s.RFilename); err != nil {
			return nil, fmt.Errorf("model info: file %d: %w", i, err)
		}
		if seen[s.RFilename] {
			return nil, fmt.Errorf("model info: file %q is listed twice", s.RFilename)
		}
		seen[s.RFilename] = true
		f := File{Path: s.RFilename, Size: -1}
		if s.Size != nil {
			f.Size = *s.Size
		}
		if s.LFS != nil {
			sum := strings.ToLower(s.LFS.SHA256)
			if !isSHA256(sum) {
				return nil, fmt.Errorf("model info: file %q: LFS SHA-256 %q is not 64 hex digits", s.RFilename, s.LFS.SHA256)
			}
			if s.Size != nil && *s.Size != s.LFS.Size {
				return nil, fmt.Errorf("model info: file %q: size %d but LFS size %d", s.RFilename, *s.Size, s.LFS.Size)
			}
			f.SHA256, f.Size = sum, s.LFS.Size
		}
		if f.Size < -1 || (s.Size != nil || s.LFS != nil) && f.Size < 0 {
			return nil, fmt.Errorf("model info: file %q: size %d", s.RFilename, f.Size)
		}
		info.Files = append(info.Files, f)
	}
	return info, nil
}

// Info asks the hub for repo at revision rev: its commit and files with
// sizes and LFS hashes.
func (c *Client) Info(ctx context.Context, repo, rev string) (*RepoInfo, error) {
	if err := checkRepo(repo); err != nil {
		return nil, err
	}
	u := c.endpoint() + "/api/models/" + repo + "/revision/" + url.PathEscape(rev) + "?blobs=true"
	resp, err := c.get(ctx, u)
	if err != nil {
		return nil, c.explain(err, repo, rev)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxInfo+1))
	if err != nil {
		return nil, fmt.Errorf("reading the file list of %s@%s: %w", repo, rev, err)
	}
	if len(data) > maxInfo {
		return nil, fmt.Errorf("the file list of %s@%s is over %d MiB", repo, rev, maxInfo>>20)
	}
	info, err := ParseInfo(data)
	if err != nil {
		return nil, fmt.Errorf("%s@%s from %s: %w", repo, rev, c.endpoint(), err)
	}
	if isCommit(rev) && info.Commit != rev {
		return nil, fmt.Errorf("%s: asked for commit %s, the hub answered for %s", repo, rev, info.Commit)
	}
	info.Repo = repo
	return info, nil
}

// explain turns a hub's refusal into what the user can do about it.
func (c *Client) explain(err error, repo, rev string) error {
	var se *StatusError
	if !errors.As(err, &se) {
		return err
	}
	token := "set HF_TOKEN to a token with access"
	if c.Token != "" {
		token = "the HF_TOKEN given has no access to it, or is invalid"
	}
	switch {
	case se.Code == "RevisionNotFound":
		return fmt.Errorf("revision %q not found in %s: %w", rev, repo, err)
	case se.Code == "EntryNotFound":
		return fmt.Errorf("a file of %s@%s is not there: %w", repo, rev, err)
	case se.Code == "GatedRepo":
		return fmt.Errorf("%s is gated: accept its terms on the hub's page, then %s: %w", repo, token, err)
	case se.Code == "RepoNotFound" || se.Status == http.StatusNotFound:
		if se.Status == http.StatusUnauthorized && c.Token == "" {
			return fmt.Errorf("repository %s not found at %s (if it is private or gated, set HF_TOKEN): %w", repo, c.endpoint(), err)
		}
		return fmt.Errorf("repository %s not found at %s: %w", repo, c.endpoint(), err)
	case se.Status == http.StatusUnauthorized:
		if c.Token != "" {
			return fmt.Errorf("the hub refused HF_TOKEN for %s (invalid or expired token?): %w", repo, err)
		}
		return fmt.Errorf("%s needs a token: %s: %w", repo, token, err)
	case se.Status == http.StatusForbidden:
		return fmt.Errorf("access to %s denied: %s: %w", repo, token, err)
	}
	return err
}
