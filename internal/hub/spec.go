// Package hub fetches GGUF models from a Hugging Face-compatible hub into
// the Hugging Face cache layout, and finds them there.
//
// A model is named ORG/NAME[@REVISION][:QUANT|:FILE] (Spec). The client
// (Client) asks the hub for the repository's file list with sizes and LFS
// SHA-256 (GET /api/models/ORG/NAME/revision/REV?blobs=true), picks the
// files of the quantization asked for (Select: every part of a split
// model), and downloads each one from /ORG/NAME/resolve/COMMIT/PATH with
// several ranged connections in parallel, hashing as it goes. Files land in
// the cache the Hugging Face tools share (Cache):
//
//	$HF_HUB_CACHE (or $HF_HOME/hub, or ~/.cache/huggingface/hub)
//	  .locks/models--ORG--NAME/<sha256>.lock   held while a blob is written
//	  models--ORG--NAME/blobs/<sha256>          the verified file
//	  models--ORG--NAME/blobs/<sha256>.braidpart(.state)  a download in progress
//	  models--ORG--NAME/snapshots/<commit>/<path> -> ../../blobs/<sha256>
//	  models--ORG--NAME/refs/<revision>         the commit the revision named
//
// A blob appears under its name only after its SHA-256 matched; a snapshot
// link only after its blob; a model is taken from the cache only when all of
// its parts are linked. So nothing half-written is ever opened as a model,
// and a model fetched by `hf download` is found without downloading again.
package hub

import (
	"fmt"
	"strings"
)

// Spec names a model on the hub: a repository, a revision, and which of its
// GGUF files (a quantization label, or a file path).
type Spec struct {
	Repo     string // ORG/NAME
	Revision string // branch, tag or commit; "" means main
	Quant    string // a quantization label (Q4_K_M), or ""
	File     string // a .gguf path in the repository, or ""
}

// Rev is the revision to resolve: Revision, or "main".
func (s Spec) Rev() string {
	if s.Revision == "" {
		return "main"
	}
	return s.Revision
}

// String writes the spec back in the form ParseSpec reads.
func (s Spec) String() string {
	out := s.Repo
	if s.Revision != "" {
		out += "@" + s.Revision
	}
	if s.File != "" {
		out += ":" + s.File
	} else if s.Quant != "" {
		out += ":" + s.Quant
	}
	return out
}

// ParseSpec reads ORG/NAME[@REVISION][:QUANT|:FILE]. The part after the
// colon is a file when it ends in .gguf, else a quantization label.
func ParseSpec(text string) (Spec, error) {
	var s Spec
	repo, sel, hasSel := strings.Cut(text, ":")
	repo, rev, hasRev := strings.Cut(repo, "@")
	if err := checkRepo(repo); err != nil {
		return s, fmt.Errorf("model %q: %w", text, err)
	}
	s.Repo = repo
	if hasRev {
		if err := checkRevision(rev); err != nil {
			return s, fmt.Errorf("model %q: %w", text, err)
		}
		s.Revision = rev
	}
	if hasSel {
		if strings.HasSuffix(strings.ToLower(sel), ".gguf") {
			if err := checkRepoPath(sel); err != nil {
				return s, fmt.Errorf("model %q: file %w", text, err)
			}
			s.File = sel
		} else {
			if err := checkQuant(sel); err != nil {
				return s, fmt.Errorf("model %q: %w", text, err)
			}
			s.Quant = sel
		}
	}
	return s, nil
}

// checkRepo accepts ORG/NAME as the hub names repositories: letters,
// digits, '-', '_' and '.', starting with a letter or digit, at most 96
// characters each, without "--" or ".." (the cache folder joins the two
// parts with "--").
func checkRepo(repo string) error {
	org, name, ok := strings.Cut(repo, "/")
	if !ok || strings.Contains(name, "/") {
		return fmt.Errorf("repository %q is not ORG/NAME", repo)
	}
	for _, part := range []string{org, name} {
		if part == "" || len(part) > 96 {
			return fmt.Errorf("repository %q: %q must have 1 to 96 characters", repo, part)
		}
		if !isAlnum(part[0]) {
			return fmt.Errorf("repository %q: %q must start with a letter or digit", repo, part)
		}
		for i := 0; i < len(part); i++ {
			if c := part[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
				return fmt.Errorf("repository %q: character %q is not allowed", repo, c)
			}
		}
		if strings.Contains(part, "--") || strings.Contains(part, "..") {
			return fmt.Errorf("repository %q: \"--\" and \"..\" are not allowed", repo)
		}
		if strings.HasSuffix(part, ".") {
			return fmt.Errorf("repository %q: %q must not end with '.'", repo, part)
		}
	}
	return nil
}

// checkRevision accepts a branch, tag or commit name that is safe as a
// path under refs/ (refs/pr/1 is a hub revision).
func checkRevision(rev string) error {
	if rev == "" || len(rev) > 255 {
		return fmt.Errorf("revision %q must have 1 to 255 characters", rev)
	}
	for i := 0; i < len(rev); i++ {
		if c := rev[i]; c <= ' ' || c == 0x7f || c == '\\' || c == ':' || c == '?' || c == '#' || c == '%' || c == '~' || c == '^' || c == '*' || c == '[' {
			return fmt.Errorf("revision %q: character %q is not allowed", rev, c)
		}
	}
	for _, el := range strings.Split(rev, "/") {
		if el == "" || el == "." || el == ".." || strings.HasPrefix(el, ".") || strings.HasSuffix(el, ".lock") {
			return fmt.Errorf("revision %q: element %q is not allowed", rev, el)
		}
	}
	return nil
}

// checkQuant accepts a quantization label: letters, digits, '_', '-' and
// '.', starting with a letter or digit, at most 64 characters.
func checkQuant(q string) error {
	if q == "" || len(q) > 64 || !isAlnum(q[0]) {
		return fmt.Errorf("quantization %q must be 1 to 64 letters, digits, '_', '-' or '.', starting with a letter or digit", q)
	}
	for i := 0; i < len(q); i++ {
		if c := q[i]; !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			return fmt.Errorf("quantization %q: character %q is not allowed", q, c)
		}
	}
	return nil
}

// checkRepoPath accepts a relative slash-separated path that stays inside
// the folder it is joined to: no empty, "." or ".." elements, no
// backslash, no control characters.
func checkRepoPath(p string) error {
	if p == "" || len(p) > 1024 {
		return fmt.Errorf("path %q must have 1 to 1024 characters", p)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < ' ' || c == 0x7f || c == '\\' {
			return fmt.Errorf("path %q: character %q is not allowed", p, c)
		}
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("path %q: element %q is not allowed", p, el)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isCommit says whether rev is a full commit hash (40 lowercase hex).
func isCommit(rev string) bool { return isHex(rev, 40) }

// isSHA256 says whether s is a SHA-256 in lowercase hex.
func isSHA256(s string) bool { return isHex(s, 64) }

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
