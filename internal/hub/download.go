package hub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"braid/internal/sysinfo"
)

// ErrHashMismatch says a download's bytes are not the ones the hub listed.
var ErrHashMismatch = errors.New("SHA-256 mismatch")

// ErrNoSpace says the cache's disk cannot hold a download.
var ErrNoSpace = errors.New("not enough disk space")

// A partial download is the file at its full size (sparse where nothing
// arrived yet) beside its blob, BLOB.braidpart, and BLOB.braidpart.state:
// a header naming the file, then one byte per chunk, '1' once the chunk is
// written.
const stateMagic = "braid-part 1"

func stateHeader(sha string, size, chunk int64) string {
	return fmt.Sprintf("%s %s %d %d\n", stateMagic, sha, size, chunk)
}

// chunkSize is the bytes of one ranged request: a quarter of a
// connection's share, between 8 and 64 MiB, so the connections stay busy
// to the end and hashing follows close behind.
func (c *Client) chunkSize(size int64) int64 {
	if c.ChunkSize > 0 {
		return c.ChunkSize
	}
	ch := size / int64(4*c.connections())
	return min(max(ch, 8<<20), 64<<20)
}

// download fetches one file into its blob.
type download struct {
	c     *Client
	hc    *http.Client
	url   string // the hub's resolve URL
	name  string // the file's path in the repository, for messages
	blob  string
	part  string
	state string
	size  int64
	sha   string
	chunk int64
	n     int // chunks

	f      *os.File
	sf     *os.File
	ready  []chan struct{} // closed when chunk i is on disk
	direct atomic.Pointer[string]
	prog   *Progress
}

// partDone is the bytes a partial download of f already holds (0 when
// there is none, or it is for another file).
func (c *Client) partDone(part string, f File) int64 {
	sb, err := os.ReadFile(part + ".state")
	if err != nil {
		return 0
	}
	hdr, bits, ok := bytes.Cut(sb, []byte("\n"))
	if !ok {
		return 0
	}
	var sha string
	var size, chunk int64
	if _, err := fmt.Sscanf(string(hdr)+"\n", stateMagic+" %s %d %d\n", &sha, &size, &chunk); err != nil || sha != f.SHA256 || size != f.Size || chunk <= 0 {
		return 0
	}
	var done int64
	for i, b := range bits {
		if b == '1' {
			done += min(chunk, size-int64(i)*chunk)
		}
	}
	return max(done, 0)
}

// fetch downloads f of repo at commit into the cache's blob for it, unless
// it is there already, and returns the bytes it downloaded. Another
// process writing the same blob is waited for (the lock the Hugging Face
// tools take too).
func (c *Client) fetch(ctx context.Context, cache Cache, repo, commit string, f File) (int64, error) {
	blob := cache.BlobPath(repo, f.SHA256)
	if fi, err := os.Stat(blob); err == nil && fi.Size() == f.Size {
		return 0, nil
	}
	unlock, err := fileLock(ctx, cache.lockPath(repo, f.SHA256), func() {
		c.logf("waiting for another download of %s (%s)", f.Path, blob)
	})
	if err != nil {
		return 0, fmt.Errorf("locking %s: %w", blob, err)
	}
	defer unlock()
	if fi, err := os.Stat(blob); err == nil {
		if fi.Size() == f.Size {
			return 0, nil // the other process finished it
		}
		// A blob of the wrong size is not the file: fetch it again.
		if err := os.Remove(blob); err != nil {
			return 0, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return 0, err
	}
	d := &download{c: c, name: f.Path, blob: blob, part: cache.partPath(repo, f.SHA256), size: f.Size, sha: f.SHA256, prog: c.Progress}
	d.state = d.part + ".state"
	d.url = c.endpoint() + "/" + repo + "/resolve/" + commit + "/" + escapePath(f.Path)
	return d.run(ctx)
}

func escapePath(p string) string {
	el := strings.Split(p, "/")
	for i := range el {
		el[i] = url.PathEscape(el[i])
	}
	return strings.Join(el, "/")
}

func (c *Client) logf(format string, a ...any) {
	if c.Logf != nil {
		c.Logf(format, a...)
	}
}

// open prepares the partial file and its state, resuming the ones left by
// an earlier run for the same file, and says which chunks are done.
func (d *download) open() ([]bool, int64, error) {
	d.chunk = d.c.chunkSize(d.size)
	var done []bool
	var have int64
	sb, err := os.ReadFile(d.state)
	if err == nil {
		hdr, bits, _ := bytes.Cut(sb, []byte("\n"))
		var sha string
		var size, chunk int64
		fi, ferr := os.Stat(d.part)
		if _, err := fmt.Sscanf(string(hdr)+"\n", stateMagic+" %s %d %d\n", &sha, &size, &chunk); err == nil && sha == d.sha && size == d.size && chunk > 0 &&
			ferr == nil && fi.Size() == d.size {
			d.chunk = chunk
			n := int((d.size + chunk - 1) / chunk)
			if len(bits) == n {
				done = make([]bool, n)
				for i, b := range bits {
					done[i] = b == '1'
				}
			}
		}
	}
	d.n = int((d.size + d.chunk - 1) / d.chunk)
	if done == nil { // nothing to resume: start afresh
		os.Remove(d.part)
		os.Remove(d.state)
		done = make([]bool, d.n)
	}
	for i, ok := range done {
		if ok {
			have += d.chunkLen(i)
		}
	}
	if free, ok := freeSpace(filepath.Dir(d.blob)); ok && free < d.size-have {
		return nil, 0, fmt.Errorf("%w for %s in %s: the download needs %s more, %s is free", ErrNoSpace, d.name, filepath.Dir(d.blob),
			sysinfo.FormatBytes(uint64(d.size-have)), sysinfo.FormatBytes(uint64(free)))
	}
	if d.f, err = os.OpenFile(d.part, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return nil, 0, err
	}
	if err := d.f.Truncate(d.size); err != nil {
		d.f.Close()
		return nil, 0, d.writeError(err)
	}
	fresh := have == 0
	if d.sf, err = os.OpenFile(d.state, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		d.f.Close()
		return nil, 0, err
	}
	if fresh {
		st := []byte(stateHeader(d.sha, d.size, d.chunk) + strings.Repeat("0", d.n))
		if err := d.sf.Truncate(0); err == nil {
			_, err = d.sf.WriteAt(st, 0)
		}
		if err != nil {
			d.close()
			return nil, 0, d.writeError(err)
		}
	}
	return done, have, nil
}

func (d *download) close() {
	if d.f != nil {
		d.f.Close()
	}
	if d.sf != nil {
		d.sf.Close()
	}
}

// discard removes the partial download (a mismatch, a full disk).
func (d *download) discard() {
	d.close()
	os.Remove(d.part)
	os.Remove(d.state)
}

func (d *download) chunkLen(i int) int64 { return min(d.chunk, d.size-int64(i)*d.chunk) }

// permanent marks an error no retry will mend.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// writeError names a full disk as such.
func (d *download) writeError(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return permanent{fmt.Errorf("%w: disk full writing %s (%s): it needs %s: %v", ErrNoSpace, d.part, d.name, sysinfo.FormatBytes(uint64(d.size)), err)}
	}
	return permanent{fmt.Errorf("writing %s: %w", d.part, err)}
}

// run downloads the missing chunks over several connections while hashing
// the finished prefix, then verifies and renames the file into place.
func (d *download) run(ctx context.Context) (int64, error) {
	done, have, err := d.open()
	if err != nil {
		return 0, err
	}
	d.hc = d.client()
	d.ready = make([]chan struct{}, d.n)
	queue := make(chan int, d.n)
	for i := range d.ready {
		d.ready[i] = make(chan struct{})
		if done[i] {
			close(d.ready[i])
		} else {
			queue <- i
		}
	}
	close(queue)
	d.prog.begin(filepath.Base(d.name), d.size, have)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var fetched, completed atomic.Int64
	var wg sync.WaitGroup
	for range min(d.c.connections(), max(len(queue), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256<<10)
			for i := range queue {
				if ctx.Err() != nil {
					return
				}
				n, err := d.fetchChunk(ctx, i, buf)
				fetched.Add(n)
				if err != nil {
					cancel(err)
					return
				}
				if _, err := d.sf.WriteAt([]byte{'1'}, int64(len(stateHeader(d.sha, d.size, d.chunk))+i)); err != nil {
					cancel(d.writeError(err))
					return
				}
				completed.Add(d.chunkLen(i))
				close(d.ready[i])
			}
		}()
	}
	sum, herr := d.hash(ctx)
	wg.Wait()
	err = context.Cause(ctx)
	if err == nil {
		err = herr
	}
	if err == nil && sum != d.sha {
		err = fmt.Errorf("%w: %s downloaded from %s has SHA-256 %s, the hub lists %s; the download was deleted",
			ErrHashMismatch, d.name, d.url, sum, d.sha)
	}
	if err == nil {
		err = d.f.Sync()
	}
	d.prog.end(err)
	if err != nil {
		if errors.Is(err, ErrHashMismatch) || errors.Is(err, ErrNoSpace) || have+completed.Load() == 0 {
			// Nothing worth resuming: leave the cache as it was.
			d.discard()
			os.Remove(filepath.Dir(d.blob))
			os.Remove(filepath.Dir(filepath.Dir(d.blob)))
		} else {
			d.close()
		}
		var p permanent
		if errors.As(err, &p) {
			err = p.error
		}
		return fetched.Load(), err
	}
	d.close()
	if err := os.Rename(d.part, d.blob); err != nil {
		return fetched.Load(), err
	}
	os.Remove(d.state)
	syncDir(filepath.Dir(d.blob))
	return fetched.Load(), nil
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}

// hash reads the file in order as its chunks land, so verifying overlaps
// the download.
func (d *download) hash(ctx context.Context) (string, error) {
	h := sha256.New()
	buf := make([]byte, 4<<20)
	for i := 0; i < d.n; i++ {
		select {
		case <-d.ready[i]:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
		off, end := int64(i)*d.chunk, int64(i)*d.chunk+d.chunkLen(i)
		for off < end {
			n, err := d.f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
			h.Write(buf[:n])
			off += int64(n)
			if err != nil && !(errors.Is(err, io.EOF) && off == end) {
				return "", permanent{fmt.Errorf("reading back %s: %w", d.part, err)}
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// client is the hub client with a redirect check of this file: the hub's
// X-Linked-Size and X-Linked-Etag must agree with its listing.
func (d *download) client() *http.Client {
	hc := d.c.httpClient()
	next := hc.CheckRedirect
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.Response != nil {
			if err := d.checkLinked(req.Response.Header); err != nil {
				return err
			}
		}
		return next(req, via)
	}
	return hc
}

func (d *download) checkLinked(h http.Header) error {
	if s := h.Get("X-Linked-Size"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n != d.size {
			return permanent{fmt.Errorf("the hub serves %s with %d bytes, its listing says %d", d.name, n, d.size)}
		}
	}
	if e := h.Get("X-Linked-Etag"); e != "" {
		e = strings.Trim(strings.TrimPrefix(e, "W/"), `"`)
		if isSHA256(e) && e != d.sha {
			return permanent{fmt.Errorf("the hub serves %s as %s, its listing says %s", d.name, e, d.sha)}
		}
	}
	return nil
}

// fetchChunk downloads chunk i, resuming within it after a broken
// connection and retrying 429 and 5xx with backoff. It returns the bytes
// it wrote.
func (d *download) fetchChunk(ctx context.Context, i int, buf []byte) (int64, error) {
	off := int64(i) * d.chunk
	end := off + d.chunkLen(i)
	var total int64
	tries := 0
	for pos := off; pos < end; {
		n, wait, err := d.fetchRange(ctx, pos, end, buf)
		pos += n
		total += n
		if err == nil {
			continue
		}
		var p permanent
		if errors.As(err, &p) || ctx.Err() != nil {
			return total, err
		}
		if n > 0 {
			tries = 0 // it moved: only failures in a row count
		}
		if tries >= d.c.retries() {
			return total, permanent{fmt.Errorf("%s bytes %d-%d: gave up after %d tries: %w", d.name, pos, end-1, tries+1, err)}
		}
		if wait == 0 {
			wait = d.c.backoff(tries)
		}
		tries++
		d.c.logf("%s: %v; retrying in %v", d.name, err, wait.Round(time.Millisecond))
		if err := sleep(ctx, wait); err != nil {
			return total, err
		}
	}
	return total, nil
}

// fetchRange asks for bytes [from, to) and writes what arrives. A
// retryable failure returns the wait its Retry-After asked for (or 0).
func (d *download) fetchRange(ctx context.Context, from, to int64, buf []byte) (int64, time.Duration, error) {
	u, direct := d.url, false
	if t := d.direct.Load(); t != nil {
		u, direct = *t, true
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stalled := atomic.Bool{}
	timer := time.AfterFunc(d.c.stall(), func() { stalled.Store(true); cancel() })
	defer timer.Stop()
	req, err := d.c.newRequest(rctx, http.MethodGet, u)
	if err != nil {
		return 0, 0, permanent{err}
	}
	if direct {
		req.Header.Del("Authorization")
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", from, to-1))
	resp, err := d.hc.Do(req)
	if err != nil {
		var p permanent
		if errors.As(err, &p) {
			return 0, 0, p
		}
		if stalled.Load() {
			return 0, 0, fmt.Errorf("no answer from %s for %v", d.c.endpoint(), d.c.stall())
		}
		return 0, 0, d.c.netError(err)
	}
	defer resp.Body.Close()
	if err := d.checkLinked(resp.Header); err != nil {
		return 0, 0, err
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, total, err := contentRange(resp.Header.Get("Content-Range"))
		if err != nil || start != from || total >= 0 && total != d.size {
			return 0, 0, permanent{fmt.Errorf("%s: asked for bytes %d-%d of %d, the server sent Content-Range %q", d.name, from, to-1, d.size, resp.Header.Get("Content-Range"))}
		}
	case http.StatusOK:
		if from != 0 {
			return 0, 0, permanent{fmt.Errorf("%s: the server at %s ignores Range requests (HTTP 200 for bytes %d-)", d.name, resp.Request.URL.Host, from)}
		}
	default:
		se := statusError(resp)
		if direct && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone) {
			d.direct.Store(nil) // a signed URL expired: ask the hub again
			return 0, 0, se
		}
		if retryable(resp.StatusCode) {
			return 0, d.c.wait(0, resp), se
		}
		return 0, 0, permanent{d.c.explainFile(se, d.name)}
	}
	if resp.Request.URL.String() != u {
		s := resp.Request.URL.String()
		d.direct.Store(&s) // the next chunks go straight to where the hub sent this one
	}
	var n int64
	body := io.LimitReader(resp.Body, to-from)
	for {
		k, rerr := body.Read(buf)
		if k > 0 {
			timer.Reset(d.c.stall())
			if _, err := d.f.WriteAt(buf[:k], from+n); err != nil {
				return n, 0, d.writeError(err)
			}
			n += int64(k)
			d.prog.add(int64(k))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if stalled.Load() {
				return n, 0, fmt.Errorf("%s: no byte for %v after %d of bytes %d-%d", d.name, d.c.stall(), n, from, to-1)
			}
			return n, 0, fmt.Errorf("%s: connection broken after %d of bytes %d-%d: %w", d.name, n, from, to-1, rerr)
		}
	}
	if n < to-from {
		return n, 0, fmt.Errorf("%s: the server ended bytes %d-%d after %d", d.name, from, to-1, n)
	}
	return n, 0, nil
}

// contentRange reads "bytes START-END/TOTAL"; total is -1 for "*".
func contentRange(v string) (start, total int64, err error) {
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, 0, fmt.Errorf("bad Content-Range %q", v)
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, fmt.Errorf("bad Content-Range %q", v)
	}
	s, _, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, fmt.Errorf("bad Content-Range %q", v)
	}
	if start, err = strconv.ParseInt(s, 10, 64); err != nil || start < 0 {
		return 0, 0, fmt.Errorf("bad Content-Range %q", v)
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total < 0 {
			return 0, 0, fmt.Errorf("bad Content-Range %q", v)
		}
	}
	return start, total, nil
}

// explainFile names the file a hub's refusal was about.
func (c *Client) explainFile(se *StatusError, name string) error {
	switch se.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		if c.Token == "" {
			return fmt.Errorf("downloading %s needs a token: set HF_TOKEN: %w", name, se)
		}
		return fmt.Errorf("downloading %s: the hub refused HF_TOKEN: %w", name, se)
	case http.StatusNotFound:
		return fmt.Errorf("downloading %s: not found: %w", name, se)
	}
	return fmt.Errorf("downloading %s: %w", name, se)
}
