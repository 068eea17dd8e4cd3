package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

var negInf = float32(math.Inf(-1))

// hashCache remembers model hashes in the user's cache directory, keyed by
// absolute path, size and modification time, so a multi-gigabyte GGUF is
// read once, not at every load (model folders may be read-only, so nothing
// is written beside the model).
type hashCache struct {
	dir string // "" = no cache (hash every time)
	mu  sync.Mutex
}

var defaultHashes = newHashCache("")

// newHashCache uses dir, or os.UserCacheDir()/braid when dir is empty.
func newHashCache(dir string) *hashCache {
	if dir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(d, "braid")
		}
	}
	return &hashCache{dir: dir}
}

func (h *hashCache) file() string { return filepath.Join(h.dir, "model-sha256.json") }

func hashKey(abs string, fi os.FileInfo) string {
	return abs + "\x00" + strconv.FormatInt(fi.Size(), 10) + "\x00" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

func (h *hashCache) load() map[string]string {
	m := map[string]string{}
	if h.dir == "" {
		return m
	}
	b, err := os.ReadFile(h.file())
	if err != nil || len(b) > 16<<20 {
		return m
	}
	if json.Unmarshal(b, &m) != nil {
		return map[string]string{}
	}
	return m
}

// SHA256 returns the hex SHA-256 of the file at path and its size, from the
// cache when the path, size and modification time are unchanged.
func (h *hashCache) SHA256(path string) (string, int64, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", 0, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", 0, err
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", abs)
	}
	if sum, ok := hubBlobSHA256(abs); ok {
		return sum, fi.Size(), nil
	}
	key := hashKey(abs, fi)
	h.mu.Lock()
	sum, ok := h.load()[key]
	h.mu.Unlock()
	if ok && len(sum) == 64 {
		return sum, fi.Size(), nil
	}
	f, err := os.Open(abs)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	d := sha256.New()
	if _, err := io.Copy(d, f); err != nil {
		return "", 0, fmt.Errorf("hashing %s: %w", abs, err)
	}
	sum = hex.EncodeToString(d.Sum(nil))
	h.store(key, sum)
	return sum, fi.Size(), nil
}

// store adds one entry, best effort: a cache that cannot be written only
// costs a re-hash next time. Written to a temporary file and renamed, so
// concurrent processes never see half a file.
func (h *hashCache) store(key, sum string) {
	if h.dir == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.load()
	m[key] = sum
	if len(m) > 10000 { // forget everything rather than grow without bound
		m = map[string]string{key: sum}
	}
	b, err := json.Marshal(m)
	if err != nil || os.MkdirAll(h.dir, 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(h.dir, "model-sha256-*.tmp")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return
	}
	if os.Rename(tmp.Name(), h.file()) != nil {
		os.Remove(tmp.Name())
	}
}

// hubBlobSHA256 reads the hash of a file in a Hugging Face hub cache from
// its name: a snapshot links to models--ORG--NAME/blobs/<sha256>, written
// under that name only once its bytes matched (by braid pull; the Hugging
// Face tools name LFS blobs by the hash the hub lists), so a model there
// is not read whole to learn it.
func hubBlobSHA256(abs string) (string, bool) {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", false
	}
	blobs := filepath.Dir(real)
	sum := filepath.Base(real)
	if filepath.Base(blobs) != "blobs" || !strings.HasPrefix(filepath.Base(filepath.Dir(blobs)), "models--") || len(sum) != 64 {
		return "", false
	}
	if _, err := hex.DecodeString(sum); err != nil || strings.ToLower(sum) != sum {
		return "", false
	}
	return sum, true
}

// ModelSHA256 returns the SHA-256 (hex) and size of the model file at path,
// remembered in the user's cache directory by path, size and modification
// time.
func ModelSHA256(path string) (string, int64, error) { return defaultHashes.SHA256(path) }

// isSHA256 says whether s is a SHA-256 as this package writes it: 64
// lower-case hex digits.
func isSHA256(s string) bool {
	_, err := hex.DecodeString(s)
	return len(s) == 64 && err == nil && strings.ToLower(s) == s
}
