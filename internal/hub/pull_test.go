package hub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"braid/internal/hub/hubtest"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// testRepo is a repository with two single-file quantizations and a model
// split in three parts.
func testRepo() hubtest.Repo {
	return hubtest.Repo{Name: "org/Model-GGUF", Files: []hubtest.File{
		{Path: "README.md", Data: []byte("# model\n"), NoLFS: true},
		{Path: "Model-Q4_K_M.gguf", Data: randomBytes(1<<20+123, 1)},
		{Path: "Model-Q8_0.gguf", Data: randomBytes(300_000, 2)},
		{Path: "Q2_K/Model-Q2_K-00001-of-00003.gguf", Data: randomBytes(200_000, 3)},
		{Path: "Q2_K/Model-Q2_K-00002-of-00003.gguf", Data: randomBytes(200_001, 4)},
		{Path: "Q2_K/Model-Q2_K-00003-of-00003.gguf", Data: randomBytes(5, 5)},
	}}
}

// testClient talks to h fast: small chunks, short backoff.
func testClient(h *hubtest.Hub) *Client {
	return &Client{Endpoint: h.URL, Connections: 4, ChunkSize: 64 << 10, Backoff: 5 * time.Millisecond, Stall: 5 * time.Second}
}

func spec(t *testing.T, s string) Spec {
	t.Helper()
	sp, err := ParseSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// tree lists every path under dir (links with their targets), for
// comparing a cache before and after.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if tgt, err := os.Readlink(p); err == nil {
			rel += " -> " + tgt
		}
		out = append(out, rel)
		return nil
	})
	sort.Strings(out)
	return out
}

// checkModel checks that m's files hold the hub's bytes, in the Hugging
// Face layout: snapshot links relative to blobs named by SHA-256.
func checkModel(t *testing.T, h *hubtest.Hub, c Cache, m *Model, want ...string) {
	t.Helper()
	if len(m.Files) != len(want) {
		t.Fatalf("model has %d files, want %v", len(m.Files), want)
	}
	for i, f := range m.Files {
		if f.Path != want[i] {
			t.Errorf("file %d is %s, want %s", i, f.Path, want[i])
		}
		data, err := os.ReadFile(f.Local)
		if err != nil {
			t.Fatal(err)
		}
		if sum(data) != h.SHA256(m.Repo, f.Path) || f.SHA256 != sum(data) {
			t.Errorf("%s: content does not match the hub's hash", f.Path)
		}
		wantLocal := filepath.Join(c.Dir, "models--"+strings.ReplaceAll(m.Repo, "/", "--"), "snapshots", m.Commit, filepath.FromSlash(f.Path))
		if f.Local != wantLocal {
			t.Errorf("local path %s, want %s", f.Local, wantLocal)
		}
		tgt, err := os.Readlink(f.Local)
		if err != nil || filepath.IsAbs(tgt) || filepath.Base(tgt) != f.SHA256 || filepath.Base(filepath.Dir(tgt)) != "blobs" {
			t.Errorf("%s links to %q (%v), want a relative link into blobs/", f.Local, tgt, err)
		}
	}
}

func TestPullLayout(t *testing.T) {
	h := hubtest.New(testRepo())
	defer h.Close()
	cache := Cache{Dir: t.TempDir()}
	c := testClient(h)
	m, err := c.Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q4_K_M"))
	if err != nil {
		t.Fatal(err)
	}
	checkModel(t, h, cache, m, "Model-Q4_K_M.gguf")
	if m.Commit != h.Commit("org/Model-GGUF") || m.Downloaded != 1<<20+123 {
		t.Errorf("commit %s, downloaded %d", m.Commit, m.Downloaded)
	}
	ref, err := os.ReadFile(filepath.Join(cache.Dir, "models--org--Model-GGUF", "refs", "main"))
	if err != nil || string(ref) != m.Commit {
		t.Errorf("refs/main = %q, %v; want %s", ref, err, m.Commit)
	}
	if h.AuthLeaked.Load() {
		t.Error("the CDN was sent an Authorization header")
	}
	// No partial file is left beside the blob.
	for _, p := range tree(t, cache.Dir) {
		if strings.Contains(p, "braidpart") || strings.Contains(p, ".tmp") || strings.Contains(p, "braidlink") {
			t.Errorf("left behind: %s", p)
		}
	}
	// Found again from the cache alone; pulled again with nothing fetched.
	got, err := cache.Find(spec(t, "org/Model-GGUF:q4_k_m"))
	if err != nil || got.Path() != m.Path() {
		t.Fatalf("Find: %v, %v", got, err)
	}
	served := h.Served.Load()
	again, err := c.Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q4_K_M"))
	if err != nil || again.Downloaded != 0 || h.Served.Load() != served {
		t.Errorf("second pull: %v, downloaded %d, served %d more", err, again.Downloaded, h.Served.Load()-served)
	}
	// The chunks went over several connections, through one redirect.
	if n := h.Resolves.Load(); n < 1 || n > 4 {
		t.Errorf("%d resolve requests for 17 chunks: the CDN URL is not reused", n)
	}
	if n := h.CDNGets.Load(); n != 17 {
		t.Errorf("%d CDN requests, want 17 chunks of 64 KiB", n)
	}
	// By commit: no ref is written for it, and the cache finds it by it.
	bycommit := spec(t, "org/Model-GGUF@"+m.Commit+":Q8_0")
	mc, err := c.Pull(context.Background(), cache, bycommit)
	if err != nil || mc.Commit != m.Commit {
		t.Fatalf("pull by commit: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache.Dir, "models--org--Model-GGUF", "refs", m.Commit)); err == nil {
		t.Error("a ref was written for a commit")
	}
	if got, err := cache.Find(bycommit); err != nil || got.Path() != mc.Path() {
		t.Errorf("Find by commit: %v, %v", got, err)
	}
}

func TestPullSplit(t *testing.T) {
	h := hubtest.New(testRepo())
	defer h.Close()
	cache := Cache{Dir: t.TempDir()}
	m, err := testClient(h).Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q2_K"))
	if err != nil {
		t.Fatal(err)
	}
	checkModel(t, h, cache, m, "Q2_K/Model-Q2_K-00001-of-00003.gguf", "Q2_K/Model-Q2_K-00002-of-00003.gguf", "Q2_K/Model-Q2_K-00003-of-00003.gguf")
	if m.Quant != "Q2_K" || m.Size() != 400_006 {
		t.Errorf("quant %s size %d", m.Quant, m.Size())
	}
	ls, err := cache.List()
	if err != nil || len(ls) != 1 || ls[0].Name() != "org/Model-GGUF:Q2_K" || len(ls[0].Refs) != 1 || ls[0].Refs[0] != "main" {
		t.Errorf("List: %+v, %v", ls, err)
	}
}

// A cache written the way the Hugging Face tools write it is used as is.
func TestHFCacheReused(t *testing.T) {
	repo := testRepo()
	h := hubtest.New(repo)
	defer h.Close()
	cache := Cache{Dir: t.TempDir()}
	commit := h.Commit(repo.Name)
	root := filepath.Join(cache.Dir, "models--org--Model-GGUF")
	for _, f := range repo.Files[3:] { // the split model
		blob := filepath.Join(root, "blobs", sum(f.Data))
		os.MkdirAll(filepath.Dir(blob), 0o755)
		if err := os.WriteFile(blob, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(root, "snapshots", commit, filepath.FromSlash(f.Path))
		os.MkdirAll(filepath.Dir(link), 0o755)
		if err := os.Symlink(filepath.Join("..", "..", "..", "blobs", sum(f.Data)), link); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(root, "refs"), 0o755)
	os.WriteFile(filepath.Join(root, "refs", "main"), []byte(commit), 0o644)

	m, err := cache.Find(spec(t, "org/Model-GGUF:Q2_K"))
	if err != nil {
		t.Fatal(err)
	}
	checkModel(t, h, cache, m, "Q2_K/Model-Q2_K-00001-of-00003.gguf", "Q2_K/Model-Q2_K-00002-of-00003.gguf", "Q2_K/Model-Q2_K-00003-of-00003.gguf")
	before := tree(t, cache.Dir)
	m, err = testClient(h).Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q2_K"))
	if err != nil || m.Downloaded != 0 || h.Served.Load() != 0 || h.CDNGets.Load() != 0 {
		t.Fatalf("pull over an HF cache: %v, downloaded %d, served %d", err, m.Downloaded, h.Served.Load())
	}
	after := tree(t, cache.Dir)
	// Only the lock folder is new.
	var added []string
	for _, p := range after {
		if !strings.HasPrefix(p, ".locks") && !contains(before, p) {
			added = append(added, p)
		}
	}
	if len(added) > 0 {
		t.Errorf("the pull changed the cache: %v", added)
	}
	// A missing part is not a model.
	os.Remove(filepath.Join(root, "snapshots", commit, "Q2_K", "Model-Q2_K-00002-of-00003.gguf"))
	if _, err := cache.Find(spec(t, "org/Model-GGUF:Q2_K")); !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "part(s) [2]") {
		t.Errorf("a model with a part missing: %v", err)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// An interrupted download resumes where it stopped and verifies.
func TestPullResumes(t *testing.T) {
	h := hubtest.New(testRepo())
	defer h.Close()
	cache := Cache{Dir: t.TempDir()}
	c := testClient(h)
	c.Connections, c.Retries = 1, -1 // one try: the cut ends the pull
	h.AddFault(hubtest.Fault{Path: "Model-Q4_K_M.gguf", CutAfter: 1000, Times: 1, Skip: 6})
	_, err := c.Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q4_K_M"))
	if err == nil || !strings.Contains(err.Error(), "Model-Q4_K_M.gguf") {
		t.Fatalf("cut pull: %v", err)
	}
	sha := h.SHA256("org/Model-GGUF", "Model-Q4_K_M.gguf")
	part := cache.partPath("org/Model-GGUF", sha)
	if _, err := os.Stat(part); err != nil {
		t.Fatalf("no partial file after the interruption: %v", err)
	}
	if _, err := os.Stat(cache.BlobPath("org/Model-GGUF", sha)); err == nil {
		t.Fatal("a blob appeared for an interrupted download")
	}
	if _, err := cache.Find(spec(t, "org/Model-GGUF:Q4_K_M")); !errors.Is(err, ErrNotCached) {
		t.Fatalf("an interrupted download is found: %v", err)
	}
	if got := c.partDone(part, File{Path: "Model-Q4_K_M.gguf", Size: 1<<20 + 123, SHA256: sha}); got != 6*64<<10 {
		t.Errorf("partial file holds %d bytes done, want 6 chunks", got)
	}
	files := []File{{Path: "Model-Q4_K_M.gguf", Size: 1<<20 + 123, SHA256: sha}}
	missing := c.Missing(cache, "org/Model-GGUF", files)
	served := h.Served.Load()
	c.Retries = 0
	m, err := c.Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q4_K_M"))
	if err != nil {
		t.Fatal(err)
	}
	checkModel(t, h, cache, m, "Model-Q4_K_M.gguf")
	if got, want := h.Served.Load()-served, int64(1<<20+123-6*64<<10); got != want || m.Downloaded != want || missing != want {
		t.Errorf("the resumed pull fetched %d bytes (reported %d, Missing said %d), want %d", got, m.Downloaded, missing, want)
	}
	if n := c.Missing(cache, "org/Model-GGUF", files); n != 0 {
		t.Errorf("Missing says %d bytes after the pull", n)
	}
	if free, ok := (Cache{Dir: filepath.Join(cache.Dir, "not", "yet")}).Free(); runtime.GOOS == "linux" && (!ok || free <= 0) {
		t.Errorf("Free of a cache folder not made yet: %d, %v", free, ok)
	}
	if _, err := os.Stat(part); err == nil {
		t.Error("the partial file is still there")
	}
}

// 429 and 5xx are retried, Retry-After honoured; connections cut mid-file
// resume within their chunk.
func TestPullRetries(t *testing.T) {
	h := hubtest.New(testRepo())
	defer h.Close()
	cache := Cache{Dir: t.TempDir()}
	c := testClient(h)
	var logs []string
	var mu sync.Mutex
	c.Logf = func(f string, a ...any) { mu.Lock(); logs = append(logs, f); mu.Unlock() }
	h.AddFault(hubtest.Fault{Status: 429, RetryAfter: "1", Times: 1})
	h.AddFault(hubtest.Fault{Status: 503, Times: 2, OnHub: true})
	h.AddFault(hubtest.Fault{Status: 500, Times: 1, Skip: 3})
	h.AddFault(hubtest.Fault{CutAfter: 5000, Times: 3, Skip: 5})
	start := time.Now()
	m, err := c.Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q4_K_M"))
	if err != nil {
		t.Fatal(err)
	}
	checkModel(t, h, cache, m, "Model-Q4_K_M.gguf")
	if el := time.Since(start); el < time.Second {
		t.Errorf("done in %v: Retry-After: 1 was not honoured", el)
	}
	if len(logs) < 7 {
		t.Errorf("%d retries logged, want 7", len(logs))
	}
	// The cut connections resumed: about one file's bytes went out.
	if got := h.Served.Load(); got < 1<<20+123 || got > 1<<20+123+3*5000 {
		t.Errorf("served %d bytes for a file of %d", got, 1<<20+123)
	}
}

// A file whose bytes do not match its hash never appears in the cache.
func TestPullCorrupt(t *testing.T) {
	repo := testRepo()
	repo.Files[1].Corrupt = true
	h := hubtest.New(repo)
	defer h.Close()
	cache := Cache{Dir: t.TempDir()}
	_, err := testClient(h).Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q4_K_M"))
	if !errors.Is(err, ErrHashMismatch) || !strings.Contains(err.Error(), "Model-Q4_K_M.gguf") || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("corrupt download: %v", err)
	}
	for _, p := range tree(t, cache.Dir) {
		if strings.Contains(p, "blobs/") || strings.Contains(p, "snapshots/") || strings.Contains(p, "refs/") {
			t.Errorf("a corrupt download left %s", p)
		}
	}
	if _, err := cache.Find(spec(t, "org/Model-GGUF:Q4_K_M")); !errors.Is(err, ErrNotCached) {
		t.Errorf("Find after a corrupt download: %v", err)
	}
}

// Two pulls of the same model at once: one downloads, the other waits
// for it, and both get the verified file.
func TestConcurrentPulls(t *testing.T) {
	h := hubtest.New(testRepo())
	defer h.Close()
	h.Delay.Store(int64(200 * time.Microsecond))
	cache := Cache{Dir: t.TempDir()}
	var wg sync.WaitGroup
	models := make([]*Model, 3)
	errs := make([]error, 3)
	for i := range models {
		wg.Add(1)
		go func() {
			defer wg.Done()
			models[i], errs[i] = testClient(h).Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q2_K"))
		}()
	}
	wg.Wait()
	var downloaded int64
	for i := range models {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		checkModel(t, h, cache, models[i], "Q2_K/Model-Q2_K-00001-of-00003.gguf", "Q2_K/Model-Q2_K-00002-of-00003.gguf", "Q2_K/Model-Q2_K-00003-of-00003.gguf")
		downloaded += models[i].Downloaded
	}
	if downloaded != 400_006 || h.Served.Load() != 400_006 {
		t.Errorf("three pulls downloaded %d bytes (served %d), want the model once", downloaded, h.Served.Load())
	}
}

func TestPullErrors(t *testing.T) {
	repo := testRepo()
	gated := hubtest.Repo{Name: "org/Gated", Gated: true, Files: []hubtest.File{{Path: "g-Q8_0.gguf", Data: []byte("gated")}}}
	private := hubtest.Repo{Name: "org/Private", Private: true, Files: []hubtest.File{{Path: "p-Q8_0.gguf", Data: []byte("private")}}}
	h := hubtest.New(repo, gated, private)
	defer h.Close()
	cache := Cache{Dir: t.TempDir()}
	for _, c := range []struct {
		spec, token, msg string
	}{
		{"org/Missing:Q4_K_M", "", "repository org/Missing not found"},
		{"org/Missing:Q4_K_M", "", "set HF_TOKEN"},
		{"org/Model-GGUF:Q5_K_M", "", "org/Model-GGUF@main has no Q5_K_M model; quantizations there: Q2_K, Q4_K_M, Q8_0"},
		{"org/Model-GGUF@v9:Q4_K_M", "", `revision "v9" not found in org/Model-GGUF`},
		{"org/Gated:Q8_0", "", "needs a token: set HF_TOKEN"},
		{"org/Gated:Q8_0", "hf_wrong", "refused HF_TOKEN"},
		{"org/Private:Q8_0", "", "repository org/Private not found"},
		{"org/Model-GGUF:README.md", "", "no README.md model"},
	} {
		cl := testClient(h)
		cl.Token = c.token
		_, err := cl.Pull(context.Background(), cache, spec(t, c.spec))
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("pull %s (token %q): %v, want %q", c.spec, c.token, err, c.msg)
		}
	}
	for _, p := range tree(t, cache.Dir)[1:] {
		if !strings.HasPrefix(p, ".locks") {
			t.Errorf("failed pulls changed the cache: %s", p)
		}
	}
	// The right token opens gated and private repositories.
	for _, s := range []string{"org/Gated:Q8_0", "org/Private:Q8_0"} {
		cl := testClient(h)
		cl.Token = h.Token
		if _, err := cl.Pull(context.Background(), cache, spec(t, s)); err != nil {
			t.Errorf("pull %s with the token: %v", s, err)
		}
	}
	if h.AuthLeaked.Load() {
		t.Error("the token went to the CDN")
	}
	// A file without an LFS hash cannot be verified: refused.
	h.Add(hubtest.Repo{Name: "org/NoLFS", Files: []hubtest.File{{Path: "m.gguf", Data: []byte("x"), NoLFS: true}}})
	if _, err := testClient(h).Pull(context.Background(), cache, spec(t, "org/NoLFS")); err == nil || !strings.Contains(err.Error(), "no LFS SHA-256") {
		t.Errorf("non-LFS file: %v", err)
	}
}

func TestPullNoNetwork(t *testing.T) {
	h := hubtest.New(testRepo())
	url := h.URL
	h.Close() // nothing listens there now
	cache := Cache{Dir: t.TempDir()}
	c := &Client{Endpoint: url, Retries: 2, Backoff: time.Millisecond}
	_, err := c.Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q4_K_M"))
	if err == nil || !strings.Contains(err.Error(), "cannot reach the hub at "+url) {
		t.Errorf("no network: %v", err)
	}
	c.Offline = true
	if _, err := c.Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q4_K_M")); !errors.Is(err, ErrOffline) {
		t.Errorf("offline: %v", err)
	}
	if got := tree(t, cache.Dir); len(got) != 1 {
		t.Errorf("the cache changed: %v", got)
	}
}

func TestPullNoSpace(t *testing.T) {
	h := hubtest.New(testRepo())
	defer h.Close()
	cache := Cache{Dir: t.TempDir()}
	defer func(f func(string) (int64, bool)) { freeSpace = f }(freeSpace)
	freeSpace = func(string) (int64, bool) { return 1000, true }
	_, err := testClient(h).Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q2_K"))
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "needs 390.63 KiB, 1000 B is free") {
		t.Errorf("no space: %v", err)
	}
	if got := tree(t, cache.Dir); len(got) != 1 {
		t.Errorf("the cache changed: %v", got)
	}
}

func TestRemove(t *testing.T) {
	h := hubtest.New(testRepo())
	defer h.Close()
	cache := Cache{Dir: t.TempDir()}
	c := testClient(h)
	for _, s := range []string{"org/Model-GGUF:Q2_K", "org/Model-GGUF:Q8_0"} {
		if _, err := c.Pull(context.Background(), cache, spec(t, s)); err != nil {
			t.Fatal(err)
		}
	}
	freed, err := cache.Remove(spec(t, "org/Model-GGUF:Q2_K"))
	if err != nil || freed != 400_006 {
		t.Fatalf("Remove: %d, %v", freed, err)
	}
	ls, _ := cache.List()
	if len(ls) != 1 || ls[0].Quant != "Q8_0" {
		t.Errorf("after removing Q2_K: %+v", ls)
	}
	if _, err := cache.Remove(spec(t, "org/Model-GGUF:Q2_K")); !errors.Is(err, ErrNotCached) {
		t.Errorf("removing it again: %v", err)
	}
	if _, err := cache.Remove(spec(t, "org/Model-GGUF:Q8_0")); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, cache.Dir); len(got) != 2 || got[1] != ".locks" {
		t.Errorf("after removing everything: %v", got)
	}
	if _, err := c.Pull(context.Background(), cache, spec(t, "org/Model-GGUF:Q8_0")); err != nil {
		t.Fatal(err)
	}
	if freed, err := cache.Remove(spec(t, "org/Model-GGUF")); err != nil || freed != 300_000 {
		t.Errorf("removing the repository: %d, %v", freed, err)
	}
}

func TestProgressLine(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, false)
	p.begin("m.gguf", 1000, 100)
	p.add(400)
	time.Sleep(20 * time.Millisecond)
	if s := p.line(false); !strings.HasPrefix(s, "m.gguf  50% 500 B / 1000 B ") || !strings.Contains(s, "/s ETA ") {
		t.Errorf("line %q", s)
	}
	p.end(nil)
	if s := b.String(); !strings.Contains(s, "m.gguf 100%") && !strings.Contains(s, " in ") {
		t.Errorf("final line %q", s)
	}
	_ = io.Discard
}
