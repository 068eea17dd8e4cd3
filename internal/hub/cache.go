package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Cache is a Hugging Face hub cache folder (see the package comment).
type Cache struct {
	Dir string
}

// DefaultCacheDir is where the Hugging Face tools keep their cache:
// $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
func DefaultCacheDir() string {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("HUGGINGFACE_HUB_CACHE"); d != "" { // the older name
		return d
	}
	return filepath.Join(hfHome(), "hub")
}

// NewCache opens the cache at dir, or the default one when dir is "".
func NewCache(dir string) Cache {
	if dir == "" {
		dir = DefaultCacheDir()
	}
	return Cache{Dir: dir}
}

// ErrNotCached says the cache does not hold what was asked for.
var ErrNotCached = errors.New("not in the cache")

func repoFolder(repo string) string { return "models--" + strings.ReplaceAll(repo, "/", "--") }

func (c Cache) repoDir(repo string) string { return filepath.Join(c.Dir, repoFolder(repo)) }

// BlobPath is where the verified file with this SHA-256 lives.
func (c Cache) BlobPath(repo, sha string) string {
	return filepath.Join(c.repoDir(repo), "blobs", sha)
}

// Free is the disk space a download into the cache may still use (on
// the file system of its folder, or of the nearest existing folder above
// it when it does not exist yet); ok is false when it cannot be known.
func (c Cache) Free() (free int64, ok bool) {
	dir := c.Dir
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return freeSpace(dir)
		}
		up := filepath.Dir(dir)
		if up == dir {
			return 0, false
		}
		dir = up
	}
}

func (c Cache) partPath(repo, sha string) string { return c.BlobPath(repo, sha) + ".braidpart" }

func (c Cache) lockPath(repo, sha string) string {
	return filepath.Join(c.Dir, ".locks", repoFolder(repo), sha+".lock")
}

func (c Cache) snapshotPath(repo, commit, p string) string {
	return filepath.Join(c.repoDir(repo), "snapshots", commit, filepath.FromSlash(p))
}

func (c Cache) refPath(repo, rev string) string {
	return filepath.Join(c.repoDir(repo), "refs", filepath.FromSlash(rev))
}

// LocalFile is a repository file in the cache: Local is its path in the
// snapshot folder (a link to its blob).
type LocalFile struct {
	File
	Local string
}

// Model is one model in the cache: every part of it, in order.
type Model struct {
	Repo     string
	Revision string // the revision asked for ("" when listed by commit)
	Commit   string
	Refs     []string // the revisions that name Commit (from List)
	Quant    string   // the quantization label, or the file name
	Files    []LocalFile
	// Downloaded is the bytes Pull fetched (0 when all were cached).
	Downloaded int64
}

// Path is the file to open: the model, or the first part of a split one.
func (m *Model) Path() string { return m.Files[0].Local }

// Size is the bytes of all the model's files.
func (m *Model) Size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// Name is REPO:QUANT, the model's name as a spec.
func (m *Model) Name() string { return m.Repo + ":" + m.Quant }

// Commit is the commit rev names in the cache: rev itself when it is a
// commit hash, else what refs/REV holds.
func (c Cache) Commit(repo, rev string) (string, error) {
	if isCommit(rev) {
		return rev, nil
	}
	b, err := os.ReadFile(c.refPath(repo, rev))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w: %s@%s (no %s)", ErrNotCached, repo, rev, c.refPath(repo, rev))
		}
		return "", err
	}
	commit := strings.TrimSpace(string(b))
	if !isCommit(commit) {
		return "", fmt.Errorf("%s holds %q, not a commit hash", c.refPath(repo, rev), commit)
	}
	return commit, nil
}

// snapshot lists the files of a snapshot whose content is there: a link to
// an existing blob (named by its SHA-256 for LFS files), or a plain file.
func (c Cache) snapshot(repo, commit string) ([]LocalFile, error) {
	root := filepath.Join(c.repoDir(repo), "snapshots", commit)
	var files []LocalFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		fi, err := os.Stat(p) // follows the link: a dangling one is skipped
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		f := LocalFile{File: File{Path: filepath.ToSlash(rel), Size: fi.Size()}, Local: p}
		if target, err := os.Readlink(p); err == nil {
			if name := filepath.Base(target); isSHA256(name) {
				f.SHA256 = name
			} else if strings.Contains(name, ".") { // a partial file is never a model
				return nil
			}
		}
		files = append(files, f)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s@%s (no snapshot %s)", ErrNotCached, repo, commit, root)
	}
	return files, err
}

// Find resolves spec from the cache alone: the revision's commit, then the
// model among that snapshot's complete files. The error wraps ErrNotCached
// when the cache does not hold it.
func (c Cache) Find(spec Spec) (*Model, error) {
	rev := spec.Rev()
	commit, err := c.Commit(spec.Repo, rev)
	if err != nil {
		return nil, err
	}
	local, err := c.snapshot(spec.Repo, commit)
	if err != nil {
		return nil, err
	}
	files := make([]File, len(local))
	byPath := map[string]LocalFile{}
	for i, f := range local {
		files[i] = f.File
		byPath[f.Path] = f
	}
	g, err := Select(files, spec, fmt.Sprintf("the cached %s@%s", spec.Repo, rev))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotCached, err)
	}
	m := &Model{Repo: spec.Repo, Revision: rev, Commit: commit, Quant: g.Label()}
	for _, f := range g.Files {
		m.Files = append(m.Files, byPath[f.Path])
	}
	return m, nil
}

// List finds every complete GGUF model in the cache, by repository, commit
// and name.
func (c Cache) List() ([]*Model, error) {
	entries, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Model
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), "models--")
		if !ok || !e.IsDir() {
			continue
		}
		repo := strings.Replace(name, "--", "/", 1)
		if checkRepo(repo) != nil {
			continue
		}
		refs := c.refs(repo)
		snaps, _ := os.ReadDir(filepath.Join(c.Dir, e.Name(), "snapshots"))
		for _, s := range snaps {
			if !s.IsDir() {
				continue
			}
			local, err := c.snapshot(repo, s.Name())
			if err != nil {
				continue
			}
			files := make([]File, len(local))
			byPath := map[string]LocalFile{}
			for i, f := range local {
				files[i] = f.File
				byPath[f.Path] = f
			}
			for _, g := range Groups(files) {
				if len(g.Missing) > 0 {
					continue
				}
				m := &Model{Repo: repo, Commit: s.Name(), Refs: refs[s.Name()], Quant: g.Label()}
				for _, f := range g.Files {
					m.Files = append(m.Files, byPath[f.Path])
				}
				out = append(out, m)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Repo != out[j].Repo {
			return out[i].Repo < out[j].Repo
		}
		return out[i].Quant < out[j].Quant
	})
	return out, nil
}

// refs maps each commit of repo to the revisions naming it.
func (c Cache) refs(repo string) map[string][]string {
	root := filepath.Join(c.repoDir(repo), "refs")
	out := map[string][]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		commit := strings.TrimSpace(string(b))
		out[commit] = append(out[commit], filepath.ToSlash(rel))
		return nil
	})
	return out
}

// Remove deletes from the cache what spec names: with a quantization or
// file, that model's blobs and every snapshot link to them (and the
// repository once no snapshot is left); with neither, the whole
// repository. It returns the bytes freed.
func (c Cache) Remove(spec Spec) (int64, error) {
	dir := c.repoDir(spec.Repo)
	if _, err := os.Stat(dir); err != nil {
		return 0, fmt.Errorf("%w: %s (no %s)", ErrNotCached, spec.Repo, dir)
	}
	if spec.Quant == "" && spec.File == "" {
		freed := dirBytes(filepath.Join(dir, "blobs"))
		if err := os.RemoveAll(dir); err != nil {
			return 0, err
		}
		os.RemoveAll(filepath.Join(c.Dir, ".locks", repoFolder(spec.Repo)))
		return freed, nil
	}
	m, err := c.Find(spec)
	if err != nil {
		return 0, err
	}
	drop := map[string]bool{}
	for _, f := range m.Files {
		if f.SHA256 != "" {
			drop[f.SHA256] = true
		}
	}
	var freed int64
	snaps := filepath.Join(dir, "snapshots")
	filepath.WalkDir(snaps, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if t, err := os.Readlink(p); err == nil && drop[filepath.Base(t)] {
			os.Remove(p)
		}
		return nil
	})
	for _, f := range m.Files {
		if f.SHA256 == "" { // a plain file in the snapshot (no link)
			if err := os.Remove(f.Local); err != nil {
				return freed, err
			}
			freed += f.Size
			continue
		}
		blob := c.BlobPath(spec.Repo, f.SHA256)
		if err := os.Remove(blob); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return freed, err
		}
		freed += f.Size
		os.Remove(c.partPath(spec.Repo, f.SHA256))
		os.Remove(c.partPath(spec.Repo, f.SHA256) + ".state")
	}
	pruneEmpty(snaps)
	if ents, err := os.ReadDir(snaps); err == nil && len(ents) == 0 {
		os.RemoveAll(dir)
		os.RemoveAll(filepath.Join(c.Dir, ".locks", repoFolder(spec.Repo)))
	}
	return freed, nil
}

// pruneEmpty removes the empty folders under root (not root).
func pruneEmpty(root string) {
	var dirs []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != root {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i]) // fails, as it should, when not empty
	}
}

func dirBytes(root string) int64 {
	var n int64
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// writeRef records that rev names commit (written whole, then renamed).
func (c Cache) writeRef(repo, rev, commit string) error {
	if isCommit(rev) {
		return nil
	}
	p := c.refPath(repo, rev)
	if b, err := os.ReadFile(p); err == nil && string(b) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return writeAtomic(p, []byte(commit))
}

// link makes snapshots/COMMIT/PATH a relative link to the blob sha, as the
// Hugging Face tools do; an existing entry is replaced atomically.
func (c Cache) link(repo, commit, p, sha string) (string, error) {
	dst := c.snapshotPath(repo, commit, p)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	rel, err := filepath.Rel(filepath.Dir(dst), c.BlobPath(repo, sha))
	if err != nil {
		return "", err
	}
	if t, err := os.Readlink(dst); err == nil && t == rel {
		return dst, nil
	}
	tmp := fmt.Sprintf("%s.braidlink-%d", dst, os.Getpid())
	os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		return "", fmt.Errorf("linking %s to its blob: %w", dst, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("linking %s to its blob: %w", dst, err)
	}
	return dst, nil
}

// writeAtomic writes a small file whole, through a temporary name.
func writeAtomic(p string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+path.Base(filepath.ToSlash(p))+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return errors.Join(werr, cerr)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
