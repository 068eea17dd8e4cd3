package cluster

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// File is a parsed cluster file: everything --workers, --split,
// --tensor-split and --secret-file say, plus per-node model paths and
// per-pair addresses.
//
// The format is a small subset of TOML, parsed by hand (no dependency, and
// errors name the line):
//
//	# three nodes joined by direct cables (a switchless triangle)
//	split = "tensor"               # tensor | layer | tensor=T,layer=L
//	tensor-split = [2, 1, 1]       # weights per rank, in rank order (optional)
//	secret-file = "/etc/braid/secret"
//	model = "/models/m.gguf"       # default path of the model on every node
//
//	[[rank]]                       # rank 0: this node, the coordinator
//	model = "/data/m.gguf"         # where this node has it (optional)
//
//	[[rank]]                       # rank 1
//	addr = "10.0.1.2:7000"         # its `braid worker --listen`, as rank 0 reaches it
//
//	[[rank]]                       # rank 2
//	addr = "10.0.2.3:7000"
//
//	[[link]]                       # rank 1 reaches rank 2 on their own cable
//	from = 1
//	to = 2
//	addr = "10.0.3.3"              # host, or host:port (default: rank 2's data port)
//
// Ranks are in the order written; that order indexes tensor-split. A link
// not given uses the host of the target's addr. Keys: split, tensor-split,
// secret-file, tls-dir, model, timeout (a duration, e.g. "30s") at the top; addr and
// model in [[rank]]; from, to and addr in [[link]]. Strings are double-
// quoted with \" and \\ escapes; comments start with #.
type File struct {
	Split       string
	TensorSplit []float64
	SecretFile  string
	TLSDir      string
	Model       string
	Timeout     string
	Ranks       []FileRank
	Links       map[[2]int]string
}

// FileRank is one [[rank]] table.
type FileRank struct {
	Addr  string
	Model string
	Line  int
}

type fileLink struct {
	from, to       int
	addr           string
	line           int
	set            map[string]bool
	hasFrom, hasTo bool
}

// ParseFile reads a cluster file; errors name the line.
func ParseFile(src string) (*File, error) {
	f := &File{Links: map[[2]int]string{}}
	section := ""
	var links []*fileLink
	seen := map[string]bool{}
	var rankSeen map[string]bool
	lines := strings.Split(src, "\n")
	if len(lines) > 100000 {
		return nil, fmt.Errorf("cluster file: %d lines; a cluster file is small", len(lines))
	}
	for i, raw := range lines {
		ln := i + 1
		line := strings.TrimSpace(stripComment(raw))
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "[") {
			switch line {
			case "[[rank]]":
				section = "rank"
				f.Ranks = append(f.Ranks, FileRank{Line: ln})
				rankSeen = map[string]bool{}
			case "[[link]]":
				section = "link"
				links = append(links, &fileLink{line: ln, set: map[string]bool{}})
			default:
				return nil, fmt.Errorf("cluster file line %d: unknown table %s (want [[rank]] or [[link]])", ln, line)
			}
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("cluster file line %d: want key = value, got %q", ln, clipStr(line))
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if key == "" {
			return nil, fmt.Errorf("cluster file line %d: missing key before =", ln)
		}
		var dup map[string]bool
		switch section {
		case "":
			dup = seen
		case "rank":
			dup = rankSeen
		case "link":
			dup = links[len(links)-1].set
		}
		if dup[key] {
			return nil, fmt.Errorf("cluster file line %d: %s is set twice", ln, key)
		}
		dup[key] = true
		var err error
		switch section + "." + key {
		case ".split":
			f.Split, err = parseString(val)
		case ".secret-file":
			f.SecretFile, err = parseString(val)
		case ".tls-dir":
			f.TLSDir, err = parseString(val)
		case ".model":
			f.Model, err = parseString(val)
		case ".timeout":
			f.Timeout, err = parseString(val)
		case ".tensor-split":
			f.TensorSplit, err = parseNumbers(val)
		case "rank.addr":
			f.Ranks[len(f.Ranks)-1].Addr, err = parseString(val)
		case "rank.model":
			f.Ranks[len(f.Ranks)-1].Model, err = parseString(val)
		case "link.from", "link.to":
			var n int
			n, err = parseRank(val)
			l := links[len(links)-1]
			if key == "from" {
				l.from, l.hasFrom = n, true
			} else {
				l.to, l.hasTo = n, true
			}
		case "link.addr":
			links[len(links)-1].addr, err = parseString(val)
		default:
			where := "at the top"
			if section != "" {
				where = "in [[" + section + "]]"
			}
			return nil, fmt.Errorf("cluster file line %d: unknown key %q %s", ln, key, where)
		}
		if err != nil {
			return nil, fmt.Errorf("cluster file line %d: %s: %v", ln, key, err)
		}
	}
	if len(f.Ranks) < 2 {
		return nil, fmt.Errorf("cluster file: %d [[rank]] tables; want this node (rank 0) and at least one worker", len(f.Ranks))
	}
	for r, fr := range f.Ranks {
		if r > 0 && fr.Addr == "" {
			return nil, fmt.Errorf("cluster file line %d: rank %d has no addr", fr.Line, r)
		}
	}
	if f.TensorSplit != nil && len(f.TensorSplit) != len(f.Ranks) {
		return nil, fmt.Errorf("cluster file: tensor-split has %d weights for %d ranks", len(f.TensorSplit), len(f.Ranks))
	}
	for _, l := range links {
		if !l.hasFrom || !l.hasTo || l.addr == "" {
			return nil, fmt.Errorf("cluster file line %d: a [[link]] needs from, to and addr", l.line)
		}
		if l.from >= len(f.Ranks) || l.to >= len(f.Ranks) || l.from == l.to {
			return nil, fmt.Errorf("cluster file line %d: link from rank %d to rank %d: want two different ranks of 0..%d", l.line, l.from, l.to, len(f.Ranks)-1)
		}
		// The lower rank dials the higher one.
		a, b := min(l.from, l.to), max(l.from, l.to)
		if _, ok := f.Links[[2]int{a, b}]; ok {
			return nil, fmt.Errorf("cluster file line %d: the link between ranks %d and %d is given twice", l.line, a, b)
		}
		if l.from > l.to {
			return nil, fmt.Errorf("cluster file line %d: link from rank %d to rank %d: the lower rank dials, so give from = %d, to = %d with rank %d's address", l.line, l.from, l.to, b, a, a)
		}
		f.Links[[2]int{a, b}] = l.addr
	}
	return f, nil
}

// Nodes returns the workers (ranks 1..) for a Config, each with its model
// path (its own, else the file's, else empty: the coordinator's).
func (f *File) Nodes() []Node {
	var out []Node
	for _, r := range f.Ranks[1:] {
		m := r.Model
		if m == "" {
			m = f.Model
		}
		out = append(out, Node{Addr: r.Addr, Model: m})
	}
	return out
}

// LocalModel is rank 0's model path from the file ("" when not given).
func (f *File) LocalModel() string {
	if f.Ranks[0].Model != "" {
		return f.Ranks[0].Model
	}
	return f.Model
}

// stripComment drops a # comment that is not inside a string.
func stripComment(s string) string {
	in, esc := false, false
	for i, r := range s {
		switch {
		case esc:
			esc = false
		case in && r == '\\':
			esc = true
		case r == '"':
			in = !in
		case r == '#' && !in:
			return s[:i]
		}
	}
	return s
}

func clipStr(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// parseString reads a double-quoted string with \" \\ \t \n escapes.
func parseString(v string) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", fmt.Errorf("want a double-quoted string, got %s", clipStr(v))
	}
	var b strings.Builder
	body := v[1 : len(v)-1]
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '\\':
			if i+1 >= len(body) {
				return "", fmt.Errorf("string ends in a lone backslash")
			}
			i++
			switch body[i] {
			case '"', '\\':
				b.WriteByte(body[i])
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			default:
				return "", fmt.Errorf("unknown escape \\%c", body[i])
			}
		case c == '"':
			return "", fmt.Errorf("unescaped quote inside the string")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// parseNumbers reads [n, n, ...] of positive finite numbers.
func parseNumbers(v string) ([]float64, error) {
	if len(v) < 2 || v[0] != '[' || v[len(v)-1] != ']' {
		return nil, fmt.Errorf("want an array like [1, 2], got %s", clipStr(v))
	}
	body := strings.TrimSpace(v[1 : len(v)-1])
	if body == "" {
		return nil, fmt.Errorf("empty array")
	}
	var out []float64
	for i, s := range strings.Split(body, ",") {
		s = strings.TrimSpace(s)
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || !(x > 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("item %d %q is not a positive number", i, clipStr(s))
		}
		out = append(out, x)
	}
	return out, nil
}

// parseRank reads a non-negative integer rank.
func parseRank(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 1<<10 {
		return 0, fmt.Errorf("want a rank number, got %s", clipStr(v))
	}
	return n, nil
}
