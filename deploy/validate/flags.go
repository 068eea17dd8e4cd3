package validate

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// flagSet is what `braid <command> -h` says a command accepts.
type flagSet struct {
	command string
	flags   map[string]*flagInfo // every name, aliases included
}

type flagInfo struct {
	name string // the longest name, which the checks use
	typ  string // "" for a boolean flag
	def  string // the default printed, "" when none
}

// flagLine is a flag's first help line: "  -b, --batch-size int".
var flagLine = regexp.MustCompile(`^  (-{1,2}[A-Za-z0-9][\w-]*(?:, -{1,2}[A-Za-z0-9][\w-]*)*)(?: (\S+))?$`)

var defaultNote = regexp.MustCompile(`\(default ("(?:[^"\\]|\\.)*"|[^)]*)\)$`)

// flagsOf runs `braid <command> -h` once per command and reads its flags.
func (c *checker) flagsOf(command string) (*flagSet, error) {
	if fs, ok := c.flagSets[command]; ok {
		return fs, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, c.cfg.Braid, command, "-h")
	cmd.Stdout, cmd.Stderr = &out, &out
	// -h exits 0 or 2 by convention; the flags are in the text either way.
	runErr := cmd.Run()
	fs := parseHelp(command, out.String())
	if len(fs.flags) == 0 {
		return nil, fmt.Errorf("`%s %s -h` listed no flags (%v): %.300s", c.cfg.Braid, command, runErr, out.String())
	}
	c.flagSets[command] = fs
	return fs, nil
}

// parseHelp reads the flag list of a braid command's help text.
func parseHelp(command, text string) *flagSet {
	fs := &flagSet{command: command, flags: map[string]*flagInfo{}}
	var last *flagInfo
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if m := flagLine.FindStringSubmatch(line); m != nil {
			var names []string
			for _, n := range strings.Split(m[1], ", ") {
				names = append(names, strings.TrimLeft(n, "-"))
			}
			sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
			last = &flagInfo{name: names[0], typ: m[2]}
			for _, n := range names {
				fs.flags[n] = last
			}
			continue
		}
		if last != nil && strings.HasPrefix(line, "    \t") {
			if d := defaultNote.FindStringSubmatch(line); d != nil {
				last.def = d[1]
				if u, err := strconv.Unquote(d[1]); err == nil {
					last.def = u
				}
			}
		}
	}
	return fs
}

// names lists the flags for an error message.
func (fs *flagSet) names() string {
	seen := map[*flagInfo]bool{}
	var out []string
	for _, f := range fs.flags {
		if !seen[f] {
			seen[f] = true
			if len(f.name) <= 2 {
				out = append(out, "-"+f.name)
			} else {
				out = append(out, "--"+f.name)
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// braidArgs is a parsed braid command line.
type braidArgs struct {
	command string
	values  map[string]string // by the flag's longest name; "true" for a bare boolean
	set     map[string]bool
	// unknown are the flags given that braid does not have (reported
	// once, by parseBraid; the checks of their values keep quiet).
	unknown map[string]bool
	flags   *flagSet
}

// value is the flag's value as given, else its default.
func (a *braidArgs) value(name string) string {
	if v, ok := a.values[name]; ok {
		return v
	}
	if f, ok := a.flags.flags[name]; ok {
		return f.def
	}
	return ""
}

// parseBraid checks argv (the words after "braid") as the Go flag package
// would parse them, and reports each problem against file and where.
func (c *checker) parseBraid(file, where string, argv []string) (*braidArgs, error) {
	if len(argv) == 0 {
		c.problem(file, "%s: braid without a command", where)
		return nil, nil
	}
	fs, err := c.flagsOf(argv[0])
	if err != nil {
		return nil, err
	}
	a := &braidArgs{command: argv[0], values: map[string]string{}, set: map[string]bool{}, unknown: map[string]bool{}, flags: fs}
	for i := 1; i < len(argv); i++ {
		w := argv[i]
		if w == "--" {
			if i+1 < len(argv) {
				c.problem(file, "%s: braid %s takes no arguments, got %q", where, a.command, argv[i+1:])
			}
			break
		}
		if !strings.HasPrefix(w, "-") || w == "-" {
			c.problem(file, "%s: braid %s takes no arguments, got %q (a flag's value without its flag?)", where, a.command, w)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if strings.HasPrefix(w, "---") || name == "" {
			c.problem(file, "%s: %q is not a flag", where, w)
			continue
		}
		f, ok := fs.flags[name]
		if !ok {
			c.problem(file, "%s: braid %s has no flag %s (it has: %s)", where, a.command, strings.SplitN(w, "=", 2)[0], fs.names())
			a.unknown[name] = true
			// Its value, if it has one, is no stray argument.
			if !hasVal && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
				i++
			}
			continue
		}
		if f.typ == "" {
			if !hasVal {
				val = "true"
			} else if _, err := strconv.ParseBool(val); err != nil {
				c.problem(file, "%s: %s is a boolean flag; %q is not true or false", where, w, val)
			}
		} else if !hasVal {
			if i+1 >= len(argv) {
				c.problem(file, "%s: %s needs a value (%s)", where, w, f.typ)
				continue
			}
			i++
			val = argv[i]
		}
		if msg := badValue(f.typ, val); msg != "" {
			c.problem(file, "%s: --%s %q: %s", where, f.name, val, msg)
		}
		if a.set[f.name] {
			c.problem(file, "%s: --%s is given twice (the last one wins, which hides the first)", where, f.name)
		}
		a.values[f.name], a.set[f.name] = val, true
	}
	return a, nil
}

// badValue says what is wrong with a value for a flag of type typ, the way
// the flag package would refuse it.
func badValue(typ, val string) string {
	switch typ {
	case "int":
		if _, err := strconv.ParseInt(val, 0, 64); err != nil {
			return "not an integer"
		}
	case "uint":
		if _, err := strconv.ParseUint(val, 0, 64); err != nil {
			return "not a non-negative integer"
		}
	case "float":
		if _, err := strconv.ParseFloat(val, 64); err != nil {
			return "not a number"
		}
	case "duration":
		if _, err := time.ParseDuration(val); err != nil {
			return "not a duration (e.g. 30s, 15m)"
		}
	}
	return ""
}

// portOfAddr is the port of a HOST:PORT listen address.
func portOfAddr(addr string) (int, bool) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return 0, false
	}
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil || p < 1 || p > 65535 {
		return 0, false
	}
	return p, true
}

// duration parses a flag's duration value (or default); ok false when it
// has none or it does not parse.
func duration(s string) (time.Duration, bool) {
	d, err := time.ParseDuration(s)
	return d, err == nil
}
