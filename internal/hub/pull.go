package hub

import (
	"context"
	"fmt"
	"os"

	"braid/internal/sysinfo"
)

// Pull makes the model spec names present in cache: it asks the hub for the
// revision's files, picks the model, downloads every file whose blob is not
// there yet (verified by SHA-256 before it becomes visible), links the
// snapshot and records the revision. A model already complete in the cache
// is returned with nothing downloaded.
func (c *Client) Pull(ctx context.Context, cache Cache, spec Spec) (*Model, error) {
	rev := spec.Rev()
	info, err := c.Info(ctx, spec.Repo, rev)
	if err != nil {
		return nil, err
	}
	g, err := Select(info.Files, spec, fmt.Sprintf("%s@%s", spec.Repo, rev))
	if err != nil {
		return nil, err
	}
	return c.PullFiles(ctx, cache, spec.Repo, rev, info.Commit, g.Label(), g.Files)
}

// PullFiles fetches the given files of repo at commit (the model's parts,
// with their LFS SHA-256) into cache and links them into the snapshot;
// rev, when it is not the commit, is recorded as naming it.
func (c *Client) PullFiles(ctx context.Context, cache Cache, repo, rev, commit, quant string, files []File) (*Model, error) {
	if err := checkRepo(repo); err != nil {
		return nil, err
	}
	if !isCommit(commit) {
		return nil, fmt.Errorf("%s: commit %q is not a 40-digit hash", repo, commit)
	}
	var need int64
	for _, f := range files {
		if err := checkRepoPath(f.Path); err != nil {
			return nil, fmt.Errorf("%s: %w", repo, err)
		}
		if !isSHA256(f.SHA256) {
			return nil, fmt.Errorf("%s: %s has no LFS SHA-256 in the hub's listing, so it cannot be verified; braid fetches only verifiable files", repo, f.Path)
		}
		if f.Size < 0 {
			return nil, fmt.Errorf("%s: %s has no size in the hub's listing", repo, f.Path)
		}
		need += c.missing(cache, repo, f)
	}
	if need > 0 {
		if err := os.MkdirAll(cache.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("hub cache: %w", err)
		}
		if free, ok := freeSpace(cache.Dir); ok && free < need {
			return nil, fmt.Errorf("%w for %s:%s in %s: the download needs %s, %s is free", ErrNoSpace, repo, quant, cache.Dir,
				sysinfo.FormatBytes(uint64(need)), sysinfo.FormatBytes(uint64(free)))
		}
	}
	m := &Model{Repo: repo, Revision: rev, Commit: commit, Quant: quant}
	for _, f := range files {
		n, err := c.fetch(ctx, cache, repo, commit, f)
		m.Downloaded += n
		if err != nil {
			return m, err
		}
		local, err := cache.link(repo, commit, f.Path, f.SHA256)
		if err != nil {
			return m, err
		}
		m.Files = append(m.Files, LocalFile{File: f, Local: local})
	}
	if rev != "" && rev != commit {
		if err := cache.writeRef(repo, rev, commit); err != nil {
			return m, fmt.Errorf("recording %s@%s: %w", repo, rev, err)
		}
	}
	return m, nil
}

// missing is the bytes of f a pull into cache downloads: none when its
// blob is there, else its size less what a partial download holds.
func (c *Client) missing(cache Cache, repo string, f File) int64 {
	if fi, err := os.Stat(cache.BlobPath(repo, f.SHA256)); err == nil && fi.Size() == f.Size {
		return 0
	}
	return f.Size - c.partDone(cache.partPath(repo, f.SHA256), f)
}

// Missing is the bytes a PullFiles of files into cache would download:
// those of every file whose blob is not there yet, less what partial
// downloads of them already hold. It asks the hub nothing.
func (c *Client) Missing(cache Cache, repo string, files []File) int64 {
	var n int64
	for _, f := range files {
		n += c.missing(cache, repo, f)
	}
	return n
}
