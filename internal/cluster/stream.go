package cluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"braid/internal/dist"
	"braid/internal/dist/wire"
	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
)

// Weight streaming: a worker without a local copy of the model (not at the
// coordinator's path, not under --models-dir, no shard file there or in its
// cache) answers Load with kindStream, and the coordinator sends it its
// slices over the session as a byte stream cut into kindChunk control
// frames:
//
//	u64 n | manifest (JSON, n bytes) | u64 m | the model's metadata (a GGUF
//	without tensors, m bytes) | for each piece: its bytes, then their SHA-256
//
// The worker writes them into a shard file in its cache, keyed by (model
// SHA-256, shard), checks each slice's checksum, and loads that file; the
// next load of the same shard finds it there and reads nothing from the
// network.

// chunkBytes is the payload of one stream frame.
const chunkBytes = 4 << 20

// Bounds on what a stream may announce.
const (
	maxManifest = 64 << 20
	maxMeta     = 1 << 30
	maxTensor   = 1 << 42
)

// streamManifest describes the stream that follows it.
type streamManifest struct {
	SHA256  string            `json:"sha256"`
	Name    string            `json:"name"`
	Shard   model.Shard       `json:"shard"`
	Rank    int               `json:"rank"`
	World   int               `json:"world"`
	Split   string            `json:"split"`
	Tensors []gguf.TensorInfo `json:"tensors"`
	Pieces  []piece           `json:"pieces"`
}

// checkPieces checks that every piece lies inside its tensor.
func checkPieces(tensors []gguf.TensorInfo, pieces []piece) error {
	for i, p := range pieces {
		if p.Tensor < 0 || p.Tensor >= len(tensors) {
			return fmt.Errorf("%w: piece %d names tensor %d of %d", wire.ErrMalformed, i, p.Tensor, len(tensors))
		}
		t := &tensors[p.Tensor]
		if p.Off < 0 || p.Len < 1 || p.Count < 1 || p.Stride < p.Len || p.Count > t.Size || p.Off+(p.Count-1)*p.Stride+p.Len > t.Size {
			return fmt.Errorf("%w: piece %d (%d runs of %d bytes from %d, %d apart) does not fit tensor %s of %d bytes", wire.ErrMalformed, i, p.Count, p.Len, p.Off, p.Stride, t.Name, t.Size)
		}
	}
	for _, t := range tensors {
		if t.Size < 0 || t.Size > maxTensor {
			return fmt.Errorf("%w: tensor %s of %d bytes", wire.ErrMalformed, t.Name, t.Size)
		}
	}
	return nil
}

// shardCachePath is where a worker caches the shard spec of model sha.
func shardCachePath(dir, sha, spec string) string {
	h := sha256.Sum256([]byte(spec))
	return filepath.Join(dir, fmt.Sprintf("%.16s-%s.gguf", sha, hex.EncodeToString(h[:8])))
}

// defaultShardDir is os.UserCacheDir()/braid/shards.
func defaultShardDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "braid", "shards")
}

// shardMatches opens path and reports whether it is a shard file of model
// sha that holds every slice of shard want: the same shard, or a larger one
// (a file written for an even split serves a rank whose split came out
// slightly smaller). A file written repacked serves its own shard only
// (the groups of rows start where its slices start) and only on a node
// whose kernels take its layout; err says why such a file of the model
// is not used.
func shardMatches(path, sha string, want model.Shard) (bool, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	s, spec, ok := readShardMeta(f)
	if !ok || s != sha {
		return false, nil
	}
	var have model.Shard
	if json.Unmarshal([]byte(spec), &have) != nil {
		return false, nil
	}
	if !covers(have, want) {
		return false, nil
	}
	l, _, err := model.ShardLayout(f)
	if err != nil {
		return false, err
	}
	if l != kernels.Plain && shardSpec(have) != shardSpec(want) {
		return false, fmt.Errorf("shard file %s holds shard %s in the %s layout, which serves that shard only, not %s: write it again for this split, or with braid split --layout plain", path, have.String(), l.Versioned(), want.String())
	}
	return true, nil
}

// covers says whether a shard file written for have holds every byte shard
// want reads.
func covers(have, want model.Shard) bool {
	in := func(lo, hi, wlo, whi int) bool { return whi <= wlo || (lo <= wlo && whi <= hi) }
	return have.First <= want.First && want.Last <= have.Last &&
		in(have.HeadLo, have.HeadHi, want.HeadLo, want.HeadHi) && in(have.KVLo, have.KVHi, want.KVLo, want.KVHi) &&
		in(have.FFLo, have.FFHi, want.FFLo, want.FFHi) && in(have.ExpFFLo, have.ExpFFHi, want.ExpFFLo, want.ExpFFHi) &&
		in(have.VocabLo, have.VocabHi, want.VocabLo, want.VocabHi)
}

// findShard looks for a shard file of the shard m asks for: in the shard
// cache, then under --models-dir (written by `braid split`).
func (w *Worker) findShard(m *loadMsg) (string, string, bool) {
	spec := shardSpec(m.Shard)
	if dir := w.shardDir(); dir != "" {
		p := shardCachePath(dir, m.SHA256, spec)
		ok, err := shardMatches(p, m.SHA256, m.Shard)
		if ok {
			return p, "the shard cache", true
		}
		if err != nil {
			w.refuseShard(p, err)
		}
	}
	if w.cfg.ModelsDir != "" {
		paths, _ := filepath.Glob(filepath.Join(w.cfg.ModelsDir, "*.gguf"))
		for _, p := range paths {
			ok, err := shardMatches(p, m.SHA256, m.Shard)
			if ok {
				return p, "a shard file under --models-dir", true
			}
			if err != nil {
				w.refuseShard(p, err)
			}
		}
	}
	return "", "", false
}

// refuseShard logs that the shard file at p is not used, and why, once
// for each path and reason: one load looks for its shard up to three
// times. Only the session goroutine calls it.
func (w *Worker) refuseShard(p string, err error) {
	why := err.Error()
	if w.refused[p] == why {
		return
	}
	if w.refused == nil || len(w.refused) >= 64 {
		w.refused = map[string]string{}
	}
	w.refused[p] = why
	w.log.Warn("worker: not using a shard file of this model", "path", p, "why", err)
}

func (w *Worker) shardDir() string {
	if w.cfg.ShardCacheDir != "" {
		return w.cfg.ShardCacheDir
	}
	return defaultShardDir()
}

// frameReader reads the stream from the session's kindChunk frames.
type frameReader struct {
	tr  *dist.TCP
	cur []byte
}

// next returns up to n bytes of the stream (a view of the current frame,
// valid until the next call).
func (r *frameReader) next(n int) ([]byte, error) {
	for len(r.cur) == 0 {
		tag, p, err := r.tr.RecvControl(0)
		if err != nil {
			return nil, err
		}
		if tag.Op != wire.OpStep || len(p) < 2 || p[0] != kindChunk {
			return nil, fmt.Errorf("%w: expected a weight stream frame, got %s of %d bytes", wire.ErrMalformed, tag, len(p))
		}
		r.cur = p[1:]
	}
	k := min(n, len(r.cur))
	b := r.cur[:k]
	r.cur = r.cur[k:]
	return b, nil
}

func (r *frameReader) Read(p []byte) (int, error) {
	b, err := r.next(len(p))
	return copy(p, b), err
}

// receiveShard asks the coordinator for the slices of m's shard, writes
// them into the shard cache and returns the file's path.
func (w *Worker) receiveShard(m *loadMsg, stage func(string)) (string, error) {
	dir := w.shardDir()
	if dir == "" {
		return "", fmt.Errorf("no cache directory to keep streamed weights in")
	}
	w.mu.Lock()
	tr := w.sess
	w.mu.Unlock()
	if tr == nil {
		return "", errNotFormed
	}
	w.quiet.Store(true) // the coordinator reads nothing while it streams
	defer w.quiet.Store(false)
	if err := tr.SendControl(0, w.reqTag, []byte{kindStream}); err != nil {
		return "", err
	}
	r := &frameReader{tr: tr}
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > maxManifest {
		return "", fmt.Errorf("%w: weight stream manifest of %d bytes", wire.ErrMalformed, size)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	var man streamManifest
	if err := json.Unmarshal(buf, &man); err != nil {
		return "", fmt.Errorf("%w: weight stream manifest: %v", wire.ErrMalformed, err)
	}
	spec := shardSpec(m.Shard)
	if man.SHA256 != m.SHA256 || shardSpec(man.Shard) != spec {
		return "", fmt.Errorf("%w: the coordinator streams %s %s, the load asked for %s %s", wire.ErrMalformed, man.SHA256, shardSpec(man.Shard), m.SHA256, spec)
	}
	if err := checkPieces(man.Tensors, man.Pieces); err != nil {
		return "", err
	}
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	if size = binary.LittleEndian.Uint64(n[:]); size > maxMeta {
		return "", fmt.Errorf("%w: model metadata of %d bytes", wire.ErrMalformed, size)
	}
	buf = make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	meta, err := gguf.Parse("the coordinator's model metadata", buf)
	if err != nil {
		return "", fmt.Errorf("%w: %v", wire.ErrMalformed, err)
	}
	total := piecesBytes(man.Pieces)
	path := shardCachePath(dir, m.SHA256, spec)
	w.log.Info("worker: receiving the shard's slices from the coordinator", "model", man.Name, "bytes", total, "cache", path)
	start, got := time.Now(), int64(0)
	fill := func(sw *shardWriter) error {
		for i, p := range man.Pieces {
			h := sha256.New()
			for off := int64(0); off < p.bytes(); {
				b, err := r.next(int(min(p.bytes()-off, chunkBytes)))
				if err != nil {
					return err
				}
				if err := sw.put(i, off, b); err != nil {
					return err
				}
				h.Write(b)
				off += int64(len(b))
				got += int64(len(b))
				stage(fmt.Sprintf("receiving weights from the coordinator: %s of %s", formatBytes(got), formatBytes(total)))
			}
			var sum [32]byte
			if _, err := io.ReadFull(r, sum[:]); err != nil {
				return err
			}
			if !bytes.Equal(h.Sum(nil), sum[:]) {
				return fmt.Errorf("slice %d (tensor %s) arrived damaged: SHA-256 %x, the coordinator sent %x", i, man.Tensors[p.Tensor].Name, h.Sum(nil), sum)
			}
		}
		return nil
	}
	sm := shardMeta{SHA256: m.SHA256, Name: man.Name, Shard: m.Shard, Rank: m.Rank, World: m.World, Split: man.Split}
	if err := writeShardFile(path, meta.KVs, man.Tensors, sm, man.Pieces, fill); err != nil {
		return "", fmt.Errorf("receiving the weights: %w", err)
	}
	w.streamed.Add(uint64(total))
	w.log.Info("worker: received and cached the shard", "bytes", total, "took", time.Since(start).Round(time.Millisecond), "cache", path)
	return path, nil
}

// frameWriter cuts the stream into kindChunk frames to one worker.
type frameWriter struct {
	c    *Cluster
	w    *worker
	buf  []byte
	sent int64
	last time.Time
	all  int64
}

func (f *frameWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(f.buf) == cap(f.buf) {
			if err := f.flush(); err != nil {
				return n - len(p), err
			}
		}
		k := copy(f.buf[len(f.buf):cap(f.buf)], p)
		f.buf = f.buf[:len(f.buf)+k]
		p = p[k:]
	}
	return n, nil
}

func (f *frameWriter) flush() error {
	if len(f.buf) <= 1 {
		return nil
	}
	if err := f.w.sess.SendControl(1, wire.Tag{Step: f.w.req, Op: wire.OpStep}, f.buf); err != nil {
		return f.c.sessErr(f.w, err)
	}
	f.sent += int64(len(f.buf) - 1)
	f.buf = f.buf[:1]
	if time.Since(f.last) > time.Second {
		f.last = time.Now()
		f.c.progress("%s: streaming weights: %s of %s", f.c.describe(f.w.rank), formatBytes(f.sent), formatBytes(f.all))
	}
	return nil
}

// streamTo sends worker w its shard's slices (it answered Load with
// kindStream).
func (c *Cluster) streamTo(w *worker) error {
	sh := c.plan.Ranks[w.rank].Shard
	sh.Notes = nil
	tensors := tensorInfos(c.file)
	pieces, err := shardPieces(tensors, c.local.cfg, &sh)
	if err != nil {
		return err
	}
	mw := gguf.NewWriter()
	for _, kv := range c.file.KVs() {
		mw.Set(kv.Key, kv.Value)
	}
	var meta bytes.Buffer
	if _, err := mw.WriteTo(&meta); err != nil {
		return err
	}
	man, err := json.Marshal(&streamManifest{SHA256: c.sha, Name: filepath.Base(c.path), Shard: sh, Rank: w.rank,
		World: len(c.plan.Ranks), Split: c.mode.String(), Tensors: tensors, Pieces: pieces})
	if err != nil {
		return err
	}
	total := piecesBytes(pieces)
	c.progress("%s has no copy of the model: streaming its %s of slices", c.describe(w.rank), formatBytes(total))
	start := time.Now()
	fw := &frameWriter{c: c, w: w, buf: append(make([]byte, 0, chunkBytes+1), kindChunk), all: total + int64(len(man)+meta.Len()), last: start}
	le := binary.LittleEndian
	fw.Write(le.AppendUint64(nil, uint64(len(man))))
	fw.Write(man)
	fw.Write(le.AppendUint64(nil, uint64(meta.Len())))
	if _, err := fw.Write(meta.Bytes()); err != nil {
		return err
	}
	for _, p := range pieces {
		t, ok := c.file.Tensor(tensors[p.Tensor].Name)
		if !ok {
			return fmt.Errorf("tensor %s vanished", tensors[p.Tensor].Name)
		}
		h := sha256.New()
		for r := int64(0); r < p.Count; r++ {
			b := t.Data[p.Off+r*p.Stride : p.Off+r*p.Stride+p.Len]
			h.Write(b)
			if _, err := fw.Write(b); err != nil {
				return err
			}
		}
		if _, err := fw.Write(h.Sum(nil)); err != nil {
			return err
		}
	}
	if err := fw.flush(); err != nil {
		return err
	}
	c.streamed.Add(uint64(total))
	c.progress("%s: streamed %s in %v", c.describe(w.rank), formatBytes(total), time.Since(start).Round(time.Millisecond))
	return nil
}

// StreamedBytes counts the weight bytes this coordinator streamed to
// workers that had no copy of the model.
func (c *Cluster) StreamedBytes() uint64 { return c.streamed.Load() }
