// Package hubtest is a Hugging Face-compatible hub for tests: the model
// info API with LFS hashes, resolve URLs that redirect to a second "CDN"
// server, Range requests, gated and private repositories, and faults on
// demand (429 and 5xx with Retry-After, connections cut mid-file, bytes
// that do not match their hash).
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// File is one file of a test repository.
type File struct {
	Path string
	Data []byte // the content, or
	Disk string // a file whose content is served (for large files)
	// Corrupt serves the content with one byte changed (the listing keeps
	// the true hash).
	Corrupt bool
	// NoLFS lists the file without LFS information (no SHA-256).
	NoLFS bool

	sha  string
	size int64
}

// Repo is a test repository at one commit.
type Repo struct {
	Name    string // ORG/NAME
	Commit  string // 40 hex; derived from the name when ""
	Gated   bool   // downloads need the hub's token
	Private bool   // everything needs the hub's token; without it the repo "does not exist"
	Files   []File
}

// Fault makes the next Times matching requests fail.
type Fault struct {
	Path       string // the file's path in the repository; "" matches every file
	Status     int    // answer this status instead (429, 503...)
	RetryAfter string // with Status: the Retry-After header
	CutAfter   int64  // or: send this many bytes of the body, then cut the connection
	Times      int
	Skip       int  // let this many matching requests through first
	OnHub      bool // on the hub's resolve instead of the CDN
}

// Hub is a running test hub. URL is what HF_ENDPOINT would be.
type Hub struct {
	URL   string
	Token string // the token gated and private repos accept; any other is invalid

	api, cdn *httptest.Server

	mu     sync.Mutex
	repos  map[string]*Repo
	faults []*Fault

	Served     atomic.Int64 // body bytes the CDN sent
	CDNGets    atomic.Int64 // requests to the CDN
	Resolves   atomic.Int64 // resolve requests to the hub
	InfoGets   atomic.Int64 // model info requests
	AuthLeaked atomic.Bool  // the CDN was sent an Authorization header
	// Delay slows every CDN response body write (a slow link).
	Delay atomic.Int64 // nanoseconds per write
}

// New starts a hub serving repos; Close stops it.
func New(repos ...Repo) *Hub {
	h := &Hub{repos: map[string]*Repo{}, Token: "hf_test_token"}
	h.cdn = httptest.NewServer(http.HandlerFunc(h.serveCDN))
	h.api = httptest.NewServer(http.HandlerFunc(h.serveAPI))
	h.URL = h.api.URL
	for _, r := range repos {
		h.Add(r)
	}
	return h
}

// Close stops both servers.
func (h *Hub) Close() {
	h.api.Close()
	h.cdn.Close()
}

// Add publishes (or replaces) a repository.
func (h *Hub) Add(r Repo) {
	if r.Commit == "" {
		s := sha1.Sum([]byte(r.Name))
		r.Commit = hex.EncodeToString(s[:])
	}
	for i := range r.Files {
		f := &r.Files[i]
		d := sha256.New()
		if f.Disk != "" {
			fd, err := os.Open(f.Disk)
			if err != nil {
				panic(err)
			}
			f.size, _ = io.Copy(d, fd)
			fd.Close()
		} else {
			d.Write(f.Data)
			f.size = int64(len(f.Data))
		}
		f.sha = hex.EncodeToString(d.Sum(nil))
	}
	h.mu.Lock()
	h.repos[r.Name] = &r
	h.mu.Unlock()
}

// SHA256 is the hash the hub lists for a file.
func (h *Hub) SHA256(repo, path string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.repos[repo]; r != nil {
		for _, f := range r.Files {
			if f.Path == path {
				return f.sha
			}
		}
	}
	return ""
}

// Commit is the commit a repository's main names.
func (h *Hub) Commit(repo string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.repos[repo].Commit
}

// AddFault queues a fault.
func (h *Hub) AddFault(f Fault) {
	h.mu.Lock()
	h.faults = append(h.faults, &f)
	h.mu.Unlock()
}

func (h *Hub) takeFault(path string, onHub bool) *Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.faults {
		if f.Times > 0 && f.OnHub == onHub && (f.Path == "" || f.Path == path) {
			if f.Skip > 0 {
				f.Skip--
				return nil
			}
			f.Times--
			c := *f
			return &c
		}
	}
	return nil
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// auth says whether the request carries the hub's token: "none", "ok" or
// "bad".
func (h *Hub) auth(r *http.Request) string {
	a := r.Header.Get("Authorization")
	switch {
	case a == "":
		return "none"
	case a == "Bearer "+h.Token:
		return "ok"
	}
	return "bad"
}

// repoFor finds the repository and revision of a request, answering the
// hub's errors itself when it cannot.
func (h *Hub) repoFor(w http.ResponseWriter, r *http.Request, name, rev string, download bool) *Repo {
	auth := h.auth(r)
	if auth == "bad" {
		fail(w, http.StatusUnauthorized, "", "Invalid credentials in Authorization header")
		return nil
	}
	h.mu.Lock()
	repo := h.repos[name]
	h.mu.Unlock()
	if repo == nil || repo.Private && auth != "ok" {
		if auth == "ok" {
			fail(w, http.StatusNotFound, "RepoNotFound", "Repository Not Found for url: "+r.URL.String())
		} else {
			fail(w, http.StatusUnauthorized, "RepoNotFound", "Repository Not Found for url: "+r.URL.String())
		}
		return nil
	}
	if rev != "main" && rev != repo.Commit {
		fail(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return nil
	}
	if download && repo.Gated && auth != "ok" {
		fail(w, http.StatusUnauthorized, "GatedRepo", "Access to model "+name+" is restricted. You must have access to it and be authenticated to access it. Please log in.")
		return nil
	}
	return repo
}

func (h *Hub) serveAPI(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	if rest, ok := strings.CutPrefix(p, "/api/models/"); ok {
		h.InfoGets.Add(1)
		// ORG/NAME/revision/REV (REV path-escaped)
		parts := strings.SplitN(rest, "/", 4)
		if len(parts) != 4 || parts[2] != "revision" {
			fail(w, http.StatusNotFound, "", "no such API")
			return
		}
		rev, err := url.PathUnescape(parts[3])
		if err != nil {
			fail(w, http.StatusBadRequest, "", "bad revision")
			return
		}
		repo := h.repoFor(w, r, parts[0]+"/"+parts[1], rev, false)
		if repo == nil {
			return
		}
		type lfs struct {
			SHA256      string `json:"sha256"`
			Size        int64  `json:"size"`
			PointerSize int    `json:"pointerSize"`
		}
		type sibling struct {
			RFilename string `json:"rfilename"`
			Size      int64  `json:"size"`
			BlobID    string `json:"blobId"`
			LFS       *lfs   `json:"lfs,omitempty"`
		}
		out := struct {
			ID       string    `json:"id"`
			ModelID  string    `json:"modelId"`
			SHA      string    `json:"sha"`
			Gated    any       `json:"gated"`
			Private  bool      `json:"private"`
			Siblings []sibling `json:"siblings"`
		}{ID: repo.Name, ModelID: repo.Name, SHA: repo.Commit, Gated: repo.Gated, Private: repo.Private}
		if repo.Gated {
			out.Gated = "auto"
		}
		for _, f := range repo.Files {
			b := sha1.Sum([]byte(f.Path + f.sha))
			s := sibling{RFilename: f.Path, Size: f.size, BlobID: hex.EncodeToString(b[:])}
			if !f.NoLFS {
				s.LFS = &lfs{SHA256: f.sha, Size: f.size, PointerSize: 134}
			}
			out.Siblings = append(out.Siblings, s)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
		return
	}
	// /ORG/NAME/resolve/REV/PATH
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" {
		fail(w, http.StatusNotFound, "", "not found")
		return
	}
	h.Resolves.Add(1)
	rev, err1 := url.PathUnescape(parts[3])
	path, err2 := url.PathUnescape(parts[4])
	if err1 != nil || err2 != nil {
		fail(w, http.StatusBadRequest, "", "bad path")
		return
	}
	repo := h.repoFor(w, r, parts[0]+"/"+parts[1], rev, true)
	if repo == nil {
		return
	}
	var file *File
	for i := range repo.Files {
		if repo.Files[i].Path == path {
			file = &repo.Files[i]
		}
	}
	if file == nil {
		fail(w, http.StatusNotFound, "EntryNotFound", path+" does not exist on "+rev)
		return
	}
	if f := h.takeFault(path, true); f != nil && f.Status != 0 {
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		fail(w, f.Status, "", "injected fault")
		return
	}
	w.Header().Set("X-Repo-Commit", repo.Commit)
	w.Header().Set("ETag", `"`+file.sha+`"`)
	if file.NoLFS {
		h.serveFile(w, r, file)
		return
	}
	w.Header().Set("X-Linked-Etag", `"`+file.sha+`"`)
	w.Header().Set("X-Linked-Size", fmt.Sprint(file.size))
	w.Header().Set("Location", fmt.Sprintf("%s/blob/%s/%s?sig=%d", h.cdn.URL, url.PathEscape(repo.Name), file.sha, time.Now().UnixNano()))
	w.WriteHeader(http.StatusFound)
}

func (h *Hub) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.CDNGets.Add(1)
	if r.Header.Get("Authorization") != "" {
		h.AuthLeaked.Store(true)
	}
	if r.URL.Query().Get("sig") == "" {
		http.Error(w, "unsigned", http.StatusForbidden)
		return
	}
	// /blob/REPO/SHA
	parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/blob/"), "/")
	if len(parts) != 2 {
		http.NotFound(w, r)
		return
	}
	name, _ := url.PathUnescape(parts[0])
	h.mu.Lock()
	repo := h.repos[name]
	h.mu.Unlock()
	var file *File
	if repo != nil {
		for i := range repo.Files {
			if repo.Files[i].sha == parts[1] {
				file = &repo.Files[i]
			}
		}
	}
	if file == nil {
		http.NotFound(w, r)
		return
	}
	h.serveFile(w, r, file)
}

// serveFile answers a GET of the file's bytes, with Range support, and the
// faults queued for it.
func (h *Hub) serveFile(w http.ResponseWriter, r *http.Request, file *File) {
	fault := h.takeFault(file.Path, false)
	if fault != nil && fault.Status != 0 {
		if fault.RetryAfter != "" {
			w.Header().Set("Retry-After", fault.RetryAfter)
		}
		http.Error(w, "injected fault", fault.Status)
		return
	}
	var content io.ReadSeeker
	if file.Disk != "" {
		fd, err := os.Open(file.Disk)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer fd.Close()
		content = fd
	} else {
		data := file.Data
		if file.Corrupt {
			data = bytes.Clone(data)
			data[len(data)/2] ^= 0x55
		}
		content = bytes.NewReader(data)
	}
	cw := &countingWriter{ResponseWriter: w, h: h, limit: -1}
	if fault != nil && fault.CutAfter > 0 {
		cw.limit = fault.CutAfter
	}
	var out http.ResponseWriter = cw
	if cw.limit < 0 && h.Delay.Load() == 0 {
		out = &readFromWriter{cw} // keeps sendfile for disk files
	}
	w.Header().Set("ETag", `"`+file.sha+`"`)
	http.ServeContent(out, r, "", time.Time{}, content)
}

// countingWriter counts the body bytes sent and, with a limit, cuts the
// connection once that many have gone out.
type countingWriter struct {
	http.ResponseWriter
	h     *Hub
	limit int64
	sent  int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if d := c.h.Delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if c.limit >= 0 && c.sent+int64(len(b)) > c.limit {
		n, _ := c.ResponseWriter.Write(b[:c.limit-c.sent])
		c.sent += int64(n)
		c.h.Served.Add(int64(n))
		if f, ok := c.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler) // the server drops the connection mid-body
	}
	n, err := c.ResponseWriter.Write(b)
	c.sent += int64(n)
	c.h.Served.Add(int64(n))
	return n, err
}

type readFromWriter struct{ *countingWriter }

func (r *readFromWriter) ReadFrom(src io.Reader) (int64, error) {
	n, err := r.ResponseWriter.(io.ReaderFrom).ReadFrom(src)
	r.h.Served.Add(n)
	return n, err
}
