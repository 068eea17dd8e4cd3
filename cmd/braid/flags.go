package main

// The command-line conventions every command shares: llama.cpp's long flag
// names beside braid's short ones, help that prints defaults as they are
// written, positional words refused where a command takes none, the random
// default seed, and `braid --version`.

import (
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"braid/internal/gguf"
	"braid/internal/sysinfo"
)

// longNames pairs a short flag with the long name llama.cpp's tools give
// it. A command that has one of the pair gets the other as the same flag
// (parseInterspersed adds it), so `-m X`, `--model X` and `--model=X` all
// work wherever -m does.
var longNames = [][2]string{
	{"m", "model"},
	{"t", "threads"},
	{"c", "ctx-size"},
	{"b", "batch-size"},
	{"np", "parallel"},
	{"p", "prompt"},
	{"f", "file"},
	{"n", "n-predict"},
	{"s", "seed"},
}

// benchNames are llama-bench's long names: there -p and -n are lengths.
var benchNames = [][2]string{
	{"m", "model"},
	{"t", "threads"},
	{"p", "n-prompt"},
	{"n", "n-gen"},
	{"r", "repetitions"},
	{"d", "n-depth"},
}

// takesArgs are the commands whose positional words mean something; every
// other command refuses them (`-p Once upon a time` used only "Once").
var takesArgs = map[string]bool{"braid inspect": true, "braid pull": true, "braid rm": true, "braid ls": true}

// aliasOf maps an added name to the flag it stands for, per flag set, so
// that help prints the pair on one line.
var aliasOf = map[*flag.FlagSet]map[string]string{}

// addLongNames gives fs the other name of every pair in its command's table
// that it has only one of.
func addLongNames(fs *flag.FlagSet) {
	if _, done := aliasOf[fs]; done {
		return
	}
	table := longNames
	switch fs.Name() {
	case "braid bench":
		table = benchNames
	case "braid bench serve":
		table = nil
	}
	names := map[string]string{}
	for _, p := range table {
		a, b := fs.Lookup(p[0]), fs.Lookup(p[1])
		switch {
		case a != nil && b == nil:
			fs.Var(a.Value, p[1], a.Usage)
			names[p[1]] = p[0]
		case b != nil && a == nil:
			fs.Var(b.Value, p[0], b.Usage)
			names[p[0]] = p[1]
		}
	}
	aliasOf[fs] = names
}

// printFlags is flag.PrintDefaults with the two names of a flag on one line
// (short first) and the defaults as written.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	alias := aliasOf[fs]
	// primary name -> its other name
	other := map[string]string{}
	for a, p := range alias {
		other[p] = a
	}
	fs.VisitAll(func(f *flag.Flag) {
		if _, isAlias := alias[f.Name]; isAlias {
			return
		}
		names := []string{f.Name}
		if o, ok := other[f.Name]; ok {
			names = append(names, o)
		}
		// short (one or two letters) first
		slices.SortFunc(names, func(a, b string) int { return len(a) - len(b) })
		var b strings.Builder
		for i, n := range names {
			if i > 0 {
				b.WriteString(", ")
			}
			if len(n) <= 2 {
				b.WriteString("-" + n)
			} else {
				b.WriteString("--" + n)
			}
		}
		typ, usage := flag.UnquoteUsage(f)
		if typ != "" {
			b.WriteString(" " + typ)
		}
		fmt.Fprintf(w, "  %s\n    \t%s", b.String(), strings.ReplaceAll(usage, "\n", "\n    \t"))
		if !zeroDefault(f) {
			if typ == "string" {
				fmt.Fprintf(w, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(w, " (default %s)", f.DefValue)
			}
		}
		fmt.Fprintln(w)
	})
}

func zeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "false", "0", "0s", "[]":
		return true
	}
	if _, ok := f.Value.(*seedValue); ok {
		return true // "random" is said in the usage
	}
	return false
}

// noArgs refuses the positional words of a command that takes none: it
// would otherwise drop them silently.
func noArgs(fs *flag.FlagSet, pos []string) error {
	if len(pos) == 0 || takesArgs[fs.Name()] {
		return nil
	}
	hint := ""
	if fs.Lookup("p") != nil && fs.Lookup("prompt") != nil && fs.Name() != "braid bench" {
		hint = "; quote a prompt with spaces: -p \"" + strings.Join(pos, " ") + "\""
	}
	return usagef("unexpected argument %q (%s takes flags only%s)", pos[0], fs.Name(), hint)
}

// float32Default is a float32 default as a float64 flag default that help
// prints as written: 0.05, not 0.05000000074505806.
func float32Default(v float32) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(v), 'g', -1, 32), 64)
	return f
}

// seedValue is a sampling seed flag: a number, or -1 / "random" (the
// default) for one drawn at start and printed, so a run can be repeated.
type seedValue struct {
	set  bool
	seed uint64
}

func (s *seedValue) String() string {
	if s == nil || !s.set {
		return "random"
	}
	return strconv.FormatUint(s.seed, 10)
}

func (s *seedValue) Set(v string) error {
	if v == "-1" || v == "random" {
		s.set = false
		return nil
	}
	n, err := strconv.ParseUint(v, 0, 64)
	if err != nil {
		return fmt.Errorf("%q is not a seed: give a number from 0 to %d, or -1 for a random one", v, uint64(math.MaxUint64))
	}
	s.set, s.seed = true, n
	return nil
}

// seedFlag registers --seed (and -s, by addLongNames).
func seedFlag(fs *flag.FlagSet) *seedValue {
	s := &seedValue{}
	fs.Var(s, "seed", "sampling `seed`: the same seed gives the same output; -1 or unset: a random one, printed")
	return s
}

// value is the seed to use: the one given or a random one.
func (s *seedValue) value() uint64 {
	if s.set {
		return s.seed
	}
	var b [8]byte
	rand.Read(b[:])
	// below 2^53, so JSON readers and every shell print it exactly
	return binary.LittleEndian.Uint64(b[:]) >> 11
}

// versionText is what `braid version` and `braid --version` print.
func versionText() string {
	b := sysinfo.ReadBuild()
	v := b.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	rev := b.Revision
	if rev == "" {
		rev = "unknown revision"
	} else if len(rev) > 12 {
		rev = rev[:12]
	}
	if b.Modified {
		rev += " with uncommitted changes"
	}
	return fmt.Sprintf("braid %s (%s), %s\n", v, rev, b.Go)
}

func init() {
	register("version", "print braid's version, build revision and Go version", func(args []string, stdout, stderr io.Writer) error {
		fs := newFlags("version", "", stderr)
		if _, err := parseInterspersed(fs, args); err != nil {
			return err
		}
		fmt.Fprint(stdout, versionText())
		return nil
	})
}

// readPrompt is the prompt of -p TEXT or -f FILE (one of them; -p "" is an
// empty prompt, which starts from the beginning-of-sequence token).
func readPrompt(fs *flag.FlagSet, prompt, file string) (string, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	pGiven := given["p"] || given["prompt"]
	fGiven := given["f"] || given["file"]
	switch {
	case pGiven && fGiven:
		return "", usagef("give -p TEXT or -f FILE, not both")
	case fGiven:
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading the prompt: %w", err)
		}
		return string(data), nil
	case pGiven:
		return prompt, nil
	}
	return "", usagef("-p TEXT or -f FILE is required (-p \"\" starts from the beginning-of-sequence token)")
}

// checkSizes refuses -c and -b values that cannot work, before the model is
// opened.
func (f *modelFlags) checkSizes() error {
	if f.ctx < 0 {
		return usagef("-c %d: the context cannot be negative (0: the model's, at most 4096)", f.ctx)
	}
	if f.batch < 1 {
		return usagef("-b %d: a step needs at least one token", f.batch)
	}
	return nil
}

// warnContext says when the context chosen is past what the model was
// trained on, or smaller than a step.
func warnContext(m *gguf.Model, ctx, batch int, stderr io.Writer) {
	if train, ok := m.Int(m.Arch() + ".context_length"); ok && train > 0 && int64(ctx) > train {
		fmt.Fprintf(stderr, "braid: warning: -c %d is past the %d tokens %s was trained on; text beyond them may degrade\n", ctx, train, m.Arch())
	}
	if batch > ctx && batch != 512 { // 512: the default, not asked for
		fmt.Fprintf(stderr, "braid: note: -b %d is more than the context (%d); a step never holds more than %d tokens of one sequence\n", batch, ctx, ctx)
	}
}

// hostPort are llama-server's --host and --port, another way to say
// serve's --listen.
type hostPort struct {
	host *string
	port *int
}

func hostPortFlags(fs *flag.FlagSet) hostPort {
	return hostPort{
		host: fs.String("host", "", "address to listen on (llama-server's; with --port, instead of --listen)"),
		port: fs.Int("port", -1, "port to listen on (llama-server's; with --host, instead of --listen)"),
	}
}

// addr is the address to listen on: --listen, or it with --host and
// --port put in.
func (h hostPort) addr(fs *flag.FlagSet, listen string) (string, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !given["host"] && !given["port"] {
		return listen, nil
	}
	if given["listen"] {
		return "", usagef("give --listen HOST:PORT or --host/--port, not both")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", usagef("--listen %q: %v", listen, err)
	}
	if given["host"] {
		host = *h.host
	}
	if given["port"] {
		if *h.port < 0 || *h.port > 65535 {
			return "", usagef("--port %d: a port is from 0 to 65535 (0 picks a free one)", *h.port)
		}
		port = strconv.Itoa(*h.port)
	}
	return net.JoinHostPort(host, port), nil
}
