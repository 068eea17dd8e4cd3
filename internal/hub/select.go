package hub

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// File is one file of a repository: its path there, its size and, for a
// file stored in LFS, the SHA-256 of its bytes.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
}

// Group is one model among a repository's files: a single GGUF, or all the
// parts of a split one (NAME-0000N-of-0000M.gguf), in part order.
type Group struct {
	Quant string // the quantization label read from the file name, or ""
	Files []File
	// Missing lists the part numbers of a split model the listing lacks.
	Missing []int
}

// Name is the group's file (the first part's path, for a split model).
func (g *Group) Name() string { return g.Files[0].Path }

// Size is the bytes of all the group's files.
func (g *Group) Size() int64 {
	var n int64
	for _, f := range g.Files {
		n += f.Size
	}
	return n
}

// Label is the quantization, or the file name when none was recognised.
func (g *Group) Label() string {
	if g.Quant != "" {
		return g.Quant
	}
	return path.Base(g.Files[0].Path)
}

var splitRE = regexp.MustCompile(`(?i)^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// splitPart reads NAME-0000N-of-0000M.gguf: the name without the part
// suffix, N and M; ok is false for a single-file name.
func splitPart(p string) (base string, n, of int, ok bool) {
	m := splitRE.FindStringSubmatch(p)
	if m == nil {
		return "", 0, 0, false
	}
	n, _ = strconv.Atoi(m[2])
	of, _ = strconv.Atoi(m[3])
	if n < 1 || of < 1 || n > of {
		return "", 0, 0, false
	}
	return m[1], n, of, true
}

// quantRE finds a quantization label between separators: the llama.cpp
// types (Q4_K_M, IQ4_XS, Q8_0, MXFP4, BF16...), with an optional "UD-"
// prefix (Unsloth's dynamic quantizations).
var quantRE = regexp.MustCompile(`(?i)(?:^|[^a-z0-9])((?:ud-)?(?:iq[1-4]_(?:xxs|xs|s|m|nl|l|k_[a-z]+)|q[1-8]_k(?:_(?:xxs|xs|s|m|l|xl))?|q[1-8]_[01]|tq[12]_0|mxfp4(?:_moe)?|bf16|f16|f32))(?:$|[^a-z0-9_])`)

// QuantLabel reads the quantization from a GGUF path: the last label in
// the file name (without the split suffix), else in its folders; "" when
// there is none. Labels are upper case.
func QuantLabel(p string) string {
	if base, _, _, ok := splitPart(p); ok {
		p = base
	} else {
		p = strings.TrimSuffix(strings.TrimSuffix(p, ".gguf"), ".GGUF")
	}
	dir, file := path.Split(p)
	for _, s := range []string{file, dir} {
		if m := quantRE.FindAllStringSubmatch(s, -1); m != nil {
			return strings.ToUpper(m[len(m)-1][1])
		}
	}
	return ""
}

// isGGUF says whether p is a model file braid opens: a .gguf that is not a
// multimodal projector.
func isGGUF(p string) bool {
	lp := strings.ToLower(p)
	return strings.HasSuffix(lp, ".gguf") && !strings.Contains(path.Base(lp), "mmproj")
}

// Groups gathers a repository's GGUF files into models: one per single
// file, one per split model with its parts in order. Groups come sorted by
// name.
func Groups(files []File) []Group {
	byKey := map[string]*Group{}
	counts := map[string]int{}
	var keys []string
	add := func(key string, f File) *Group {
		g := byKey[key]
		if g == nil {
			g = &Group{Quant: QuantLabel(f.Path)}
			byKey[key] = g
			keys = append(keys, key)
		}
		g.Files = append(g.Files, f)
		return g
	}
	for _, f := range files {
		if !isGGUF(f.Path) {
			continue
		}
		if base, _, of, ok := splitPart(f.Path); ok {
			key := base + "\x00" + strconv.Itoa(of)
			add(key, f)
			counts[key] = of
			continue
		}
		add(f.Path, f)
	}
	out := make([]Group, 0, len(keys))
	for _, k := range keys {
		g := byKey[k]
		if of := counts[k]; of > 0 {
			sort.Slice(g.Files, func(i, j int) bool {
				_, a, _, _ := splitPart(g.Files[i].Path)
				_, b, _, _ := splitPart(g.Files[j].Path)
				return a < b
			})
			have := map[int]bool{}
			uniq := g.Files[:0]
			for _, f := range g.Files {
				_, n, _, _ := splitPart(f.Path)
				if !have[n] {
					uniq = append(uniq, f)
				}
				have[n] = true
			}
			g.Files = uniq
			for n := 1; n <= of; n++ {
				if !have[n] {
					g.Missing = append(g.Missing, n)
				}
			}
		}
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Labels lists the quantizations (or file names) of groups, for messages.
func Labels(groups []Group) string {
	seen := map[string]bool{}
	var l []string
	for i := range groups {
		s := groups[i].Label()
		if !seen[s] {
			seen[s] = true
			l = append(l, s)
		}
	}
	if len(l) == 0 {
		return "none"
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}

// DefaultQuant is taken when a spec names no quantization and the
// repository holds several (llama.cpp's choice too).
const DefaultQuant = "Q4_K_M"

// Select picks the model spec asks for among files (where says where they
// were listed, for messages): the file named, or the quantization named
// (matched case-insensitively against the label read from each file name,
// else as a word in the path), or with neither the only model there, else
// Q4_K_M. A split model is every one of its parts; a part missing from the
// listing is an error.
func Select(files []File, spec Spec, where string) (*Group, error) {
	groups := Groups(files)
	if len(groups) == 0 {
		return nil, fmt.Errorf("%s has no GGUF file", where)
	}
	var pick []Group
	switch {
	case spec.File != "":
		for _, g := range groups {
			for _, f := range g.Files {
				if f.Path == spec.File {
					pick = append(pick, g)
				}
			}
		}
		if len(pick) == 0 { // a file name without its folder
			for _, g := range groups {
				for _, f := range g.Files {
					if path.Base(f.Path) == spec.File {
						pick = append(pick, g)
					}
				}
			}
		}
		if len(pick) == 0 {
			return nil, fmt.Errorf("%s has no file %q; its models: %s", where, spec.File, names(groups))
		}
	case spec.Quant != "":
		for _, g := range groups {
			if strings.EqualFold(g.Quant, spec.Quant) {
				pick = append(pick, g)
			}
		}
		if len(pick) == 0 {
			for _, g := range groups {
				if containsWord(g.Name(), spec.Quant) {
					pick = append(pick, g)
				}
			}
		}
		if len(pick) == 0 {
			return nil, fmt.Errorf("%s has no %s model; quantizations there: %s", where, spec.Quant, Labels(groups))
		}
	default:
		pick = groups
		if len(groups) > 1 {
			pick = nil
			for _, g := range groups {
				if g.Quant == DefaultQuant {
					pick = append(pick, g)
				}
			}
			if len(pick) == 0 {
				return nil, fmt.Errorf("%s holds several models and no %s; name one as %s:QUANT (quantizations there: %s)",
					where, DefaultQuant, spec.Repo, Labels(groups))
			}
		}
	}
	if len(pick) > 1 {
		return nil, fmt.Errorf("%s: %q matches %d models (%s); name one as %s:FILE", where, spec.String(), len(pick), names(pick), spec.Repo)
	}
	g := pick[0]
	if len(g.Missing) > 0 {
		return nil, fmt.Errorf("%s: %s is split in %d parts but part(s) %v are missing", where, g.Name(), len(g.Files)+len(g.Missing), g.Missing)
	}
	return &g, nil
}

func names(groups []Group) string {
	var l []string
	for i := range groups {
		l = append(l, groups[i].Name())
		if len(l) == 20 && len(groups) > 21 {
			l = append(l, fmt.Sprintf("and %d more", len(groups)-20))
			break
		}
	}
	return strings.Join(l, ", ")
}

// containsWord says whether word occurs in s (ignoring case) with no letter
// or digit before it and no letter, digit or '_' after it: Q4_K matches
// "x-Q4_K.gguf" but not "x-Q4_K_M.gguf" nor "x-IQ4_K.gguf".
func containsWord(s, word string) bool {
	ls, lw := strings.ToLower(s), strings.ToLower(word)
	for i := 0; ; {
		j := strings.Index(ls[i:], lw)
		if j < 0 {
			return false
		}
		at := i + j
		end := at + len(lw)
		before := at == 0 || !isAlnum(ls[at-1])
		after := end == len(ls) || !(isAlnum(ls[end]) || ls[end] == '_')
		if before && after {
			return true
		}
		i = at + 1
	}
}
