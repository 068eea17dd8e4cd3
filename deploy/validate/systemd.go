package validate

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// unit is a parsed systemd unit file.
type unit struct {
	file string // relative to deploy/
	name string // braid-worker.service
	user bool   // a user unit (systemd/user/)
	keys map[string][]string
}

// get is the last value of section/key ("" when absent), as systemd reads
// a key given twice (for the keys that are not lists).
func (u *unit) get(key string) string {
	v := u.keys[key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// parseUnit reads a unit file: [Section] headers, KEY=VALUE, comments, and
// lines continued with a trailing backslash. Keys are "Section.Key".
func parseUnit(text string) (map[string][]string, error) {
	keys := map[string][]string{}
	section := ""
	var cont strings.Builder
	contKey := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if contKey != "" {
			if strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
				continue // a comment inside a continued value is dropped
			}
			if v, ok := strings.CutSuffix(line, "\\"); ok {
				cont.WriteString(" " + strings.TrimSpace(v))
				continue
			}
			cont.WriteString(" " + line)
			keys[contKey] = append(keys[contKey], strings.TrimSpace(cont.String()))
			contKey = ""
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			return nil, fmt.Errorf("line %d: %q is neither a [Section] nor KEY=VALUE in a section", n, line)
		}
		key := section + "." + strings.TrimSpace(k)
		v = strings.TrimSpace(v)
		if rest, ok := strings.CutSuffix(v, "\\"); ok {
			cont.Reset()
			cont.WriteString(strings.TrimSpace(rest))
			contKey = key
			continue
		}
		keys[key] = append(keys[key], v)
	}
	if contKey != "" {
		return nil, fmt.Errorf("the file ends inside a continued line (%s)", contKey)
	}
	return keys, sc.Err()
}

// specifiers are the %-specifiers the units may use, as the system manager
// and a user's manager (for user "user", uid 1000) expand them.
func specifiers(u *unit) map[byte]string {
	if u.user {
		return map[byte]string{'h': "/home/user", 'E': "/home/user/.config", 'C': "/home/user/.cache",
			'S': "/home/user/.local/state", 't': "/run/user/1000", 'd': "/run/user/1000/credentials/" + u.name,
			'n': u.name, 'N': strings.TrimSuffix(u.name, ".service"), 'u': "user", '%': "%"}
	}
	return map[byte]string{'h': "/root", 'E': "/etc", 'C': "/var/cache", 'S': "/var/lib", 't': "/run",
		'd': "/run/credentials/" + u.name, 'n': u.name, 'N': strings.TrimSuffix(u.name, ".service"), 'u': "root", '%': "%"}
}

// expandSpec expands %-specifiers; an unknown one is an error.
func expandSpec(u *unit, s string) (string, error) {
	spec := specifiers(u)
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			return "", fmt.Errorf("%q ends in a lone %%", s)
		}
		v, ok := spec[s[i+1]]
		if !ok {
			return "", fmt.Errorf("%q: specifier %%%c is not one deploy/validate knows", s, s[i+1])
		}
		b.WriteString(v)
		i++
	}
	return b.String(), nil
}

// words splits a value as systemd splits ExecStart and Environment: on
// white space, with quotes grouping and backslash escapes; each word says
// whether it was quoted (a quoted $VAR is not split).
func words(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in := false
	var quote byte
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0 && ch == quote:
			quote = 0
		case quote == 0 && (ch == '"' || ch == '\''):
			quote, in = ch, true
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case quote == 0 && (ch == ' ' || ch == '\t'):
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

var braceVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
var bareVar = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)$`)

// execArgv is ExecStart as the service manager runs it: specifiers, then
// ${VAR} within a word, $VAR alone as a word split on white space.
func execArgv(u *unit, line string, env map[string]string, used map[string]bool) ([]string, []string) {
	var problems []string
	ws, err := words(line)
	if err != nil {
		return nil, []string{err.Error()}
	}
	var argv []string
	for i, w := range ws {
		if i == 0 {
			w = strings.TrimLeft(w, "@-:+!")
		}
		w, err := expandSpec(u, w)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if m := bareVar.FindStringSubmatch(w); m != nil {
			v, ok := env[m[1]]
			used[m[1]] = true
			if !ok {
				problems = append(problems, fmt.Sprintf("ExecStart uses $%s, which no Environment= or EnvironmentFile= sets (systemd would drop it)", m[1]))
			}
			argv = append(argv, strings.Fields(v)...)
			continue
		}
		w = braceVar.ReplaceAllStringFunc(w, func(ref string) string {
			name := ref[2 : len(ref)-1]
			used[name] = true
			v, ok := env[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("ExecStart uses ${%s}, which no Environment= or EnvironmentFile= sets (systemd would put nothing there)", name))
			}
			return v
		})
		argv = append(argv, w)
	}
	return argv, problems
}

// parseEnvFile reads an EnvironmentFile: KEY=VALUE lines, comments,
// values in quotes.
func parseEnvFile(text string) (map[string]string, error) {
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(k) {
			return nil, fmt.Errorf("line %d: %q is not KEY=VALUE", n, line)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[k] = v
	}
	return env, sc.Err()
}

// timeSpan parses a systemd time span ("45s", "1min 30s", "90").
func timeSpan(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "infinity" {
		return 1<<63 - 1, true
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(n * float64(time.Second)), true
	}
	units := map[string]time.Duration{"us": time.Microsecond, "usec": time.Microsecond, "ms": time.Millisecond, "msec": time.Millisecond,
		"s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
		"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
		"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour}
	re := regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]+)`)
	var total time.Duration
	for s != "" {
		m := re.FindStringSubmatch(s)
		if m == nil {
			return 0, false
		}
		u, ok := units[m[2]]
		n, _ := strconv.ParseFloat(m[1], 64)
		if !ok {
			return 0, false
		}
		total += time.Duration(n * float64(u))
		s = strings.TrimSpace(s[len(m[0]):])
	}
	return total, true
}

// systemd checks the units and their environment file.
func (c *checker) systemd() error {
	var units []*unit
	for _, f := range c.files(`^systemd/.*\.service$`) {
		keys, err := parseUnit(f.text)
		if err != nil {
			c.problem(f.name, "%v", err)
			continue
		}
		units = append(units, &unit{file: f.name, name: path.Base(f.name), user: strings.HasPrefix(f.name, "systemd/user/"), keys: keys})
	}
	envUsed := map[string]map[string]bool{} // env file -> variables the units use
	for _, u := range units {
		if err := c.checkUnit(u, envUsed); err != nil {
			return err
		}
	}
	for file, used := range envUsed {
		f, _ := c.file(file)
		env, _ := parseEnvFile(f.text)
		var unused []string
		for k := range env {
			if !used[k] {
				unused = append(unused, k)
			}
		}
		sort.Strings(unused)
		if len(unused) > 0 {
			c.problem(file, "sets %s, which no unit uses", strings.Join(unused, ", "))
		}
	}
	if c.cfg.SystemdAnalyze != "" && len(units) > 0 {
		return c.verifyUnits(units)
	}
	return nil
}

func (c *checker) checkUnit(u *unit, envUsed map[string]map[string]bool) error {
	f := u.file
	env := map[string]string{}
	used := map[string]bool{}
	for _, ef := range u.keys["Service.EnvironmentFile"] {
		p, err := expandSpec(u, strings.TrimPrefix(ef, "-"))
		if err != nil {
			c.problem(f, "EnvironmentFile: %v", err)
			continue
		}
		// The installed file is the example beside the units.
		example := "systemd/" + path.Base(p)
		t, ok := c.file(example)
		if !ok {
			c.problem(f, "EnvironmentFile %s: deploy/%s, the file to install there, does not exist", p, example)
			continue
		}
		fe, err := parseEnvFile(t.text)
		if err != nil {
			c.problem(example, "%v", err)
			continue
		}
		for k, v := range fe {
			env[k] = v
		}
		if envUsed[example] == nil {
			envUsed[example] = map[string]bool{}
		}
		defer func(m map[string]bool) {
			for k := range used {
				m[k] = true
			}
		}(envUsed[example])
	}
	for _, e := range u.keys["Service.Environment"] {
		ws, err := words(e)
		if err != nil {
			c.problem(f, "Environment=%s: %v", e, err)
			continue
		}
		for _, w := range ws {
			k, v, ok := strings.Cut(w, "=")
			if !ok {
				c.problem(f, "Environment=%s: %q is not KEY=VALUE", e, w)
				continue
			}
			if v, err = expandSpec(u, v); err != nil {
				c.problem(f, "Environment: %v", err)
			}
			env[k] = v
		}
	}
	starts := u.keys["Service.ExecStart"]
	if len(starts) != 1 {
		c.problem(f, "%d ExecStart= lines; a service of Type=exec has one", len(starts))
		return nil
	}
	argv, probs := execArgv(u, starts[0], env, used)
	for _, p := range probs {
		c.problem(f, "%s", p)
	}
	if len(argv) == 0 || path.Base(argv[0]) != "braid" {
		c.problem(f, "ExecStart does not run braid")
		return nil
	}
	if !strings.HasPrefix(argv[0], "/") {
		c.problem(f, "ExecStart runs %s: systemd wants an absolute path", argv[0])
	}
	a, err := c.parseBraid(f, "ExecStart", argv[1:])
	if err != nil || a == nil {
		return err
	}
	if r := u.get("Service.Restart"); r != "on-failure" && r != "always" && r != "on-abnormal" {
		c.problem(f, "Restart=%q: a crashed rank should come back (on-failure)", r)
	}
	if k := u.get("Service.KillSignal"); k != "" && k != "SIGTERM" && k != "TERM" {
		c.problem(f, "KillSignal=%s: braid drains and leaves the cluster on SIGTERM", k)
	}
	if u.get("Service.MemoryMax") == "" {
		c.problem(f, "no MemoryMax= (braid offers what its cgroup allows; set it from `braid plan`)")
	}
	if u.get("Service.NoNewPrivileges") != "yes" {
		c.problem(f, "NoNewPrivileges=yes is missing")
	}
	if !u.user {
		for k, want := range map[string][]string{"DynamicUser": {"yes"}, "ProtectSystem": {"strict"},
			"ProtectHome": {"yes", "read-only", "tmpfs"}, "PrivateTmp": {"yes"}} {
			if v := u.get("Service." + k); !contains(want, v) {
				c.problem(f, "%s=%q: want %s (hardening)", k, v, strings.Join(want, " or "))
			}
		}
	}
	switch a.command {
	case "serve":
		grace, ok := duration(a.value("grace"))
		stop, sok := timeSpan(u.get("Service.TimeoutStopSec"))
		switch {
		case !ok:
			c.problem(f, "--grace %q is not a duration", a.value("grace"))
		case u.get("Service.TimeoutStopSec") == "":
			c.problem(f, "no TimeoutStopSec=: systemd's default (90s) may not cover --grace %v; set it above", grace)
		case !sok:
			c.problem(f, "TimeoutStopSec=%s does not parse", u.get("Service.TimeoutStopSec"))
		case stop <= grace:
			c.problem(f, "TimeoutStopSec=%s is not above --grace %v: systemd would kill braid mid-drain", u.get("Service.TimeoutStopSec"), grace)
		}
		if port, ok := portOfAddr(a.value("listen")); ok && !slices.Contains(c.serveListen, port) {
			c.serveListen = append(c.serveListen, port)
		}
	case "worker":
		l := a.value("listen")
		if h, _, _ := strings.Cut(l, ":"); h == "127.0.0.1" || h == "localhost" {
			c.problem(f, "--listen %s: a worker on loopback is out of its coordinator's reach", l)
		}
		if !a.set["health-listen"] && !a.unknown["health-listen"] {
			c.problem(f, "no --health-listen: a supervisor or load balancer has nothing to probe")
		}
	default:
		c.problem(f, "runs braid %s; the units run braid serve and braid worker", a.command)
	}
	// The secret: a credential when it is under %d.
	sf := a.value("secret-file")
	cred := specifiers(u)['d'] + "/"
	switch {
	case sf == "":
		c.problem(f, "no --secret-file: the ranks would accept loopback peers only")
	case strings.HasPrefix(sf, cred):
		id := strings.TrimPrefix(sf, cred)
		found := false
		for _, lc := range append(u.keys["Service.LoadCredential"], u.keys["Service.LoadCredentialEncrypted"]...) {
			if k, _, _ := strings.Cut(lc, ":"); k == id {
				found = true
			}
		}
		if !found {
			c.problem(f, "--secret-file %%d/%s: no LoadCredential=%s:... provides it", id, id)
		}
	}
	c.checkUnitPaths(u, a, env)
	return nil
}

// checkUnitPaths: under ProtectSystem=strict braid can write only its own
// directories, and ProtectHome hides home directories.
func (c *checker) checkUnitPaths(u *unit, a *braidArgs, env map[string]string) {
	f := u.file
	if u.get("Service.ProtectHome") != "" && u.get("Service.ProtectHome") != "no" {
		for _, fl := range []string{"model", "models-dir", "secret-file"} {
			v := a.value(fl)
			for _, hidden := range []string{"/home/", "/root/", "/run/user/"} {
				if strings.HasPrefix(v, hidden) {
					c.problem(f, "--%s %s: ProtectHome= hides %s", fl, v, hidden)
				}
			}
		}
	}
	if u.get("Service.ProtectSystem") != "strict" {
		return
	}
	spec := specifiers(u)
	var writable []string
	for key, base := range map[string]string{"CacheDirectory": spec['C'], "StateDirectory": spec['S'], "RuntimeDirectory": spec['t']} {
		for _, v := range u.keys["Service."+key] {
			for _, d := range strings.Fields(v) {
				writable = append(writable, base+"/"+d)
			}
		}
	}
	for _, v := range u.keys["Service.ReadWritePaths"] {
		writable = append(writable, strings.Fields(v)...)
	}
	if u.get("Service.PrivateTmp") == "yes" {
		writable = append(writable, "/tmp", "/var/tmp")
	}
	under := func(p string) bool {
		for _, w := range writable {
			if p == w || strings.HasPrefix(p, strings.TrimSuffix(w, "/")+"/") {
				return true
			}
		}
		return false
	}
	cache, ok := env["XDG_CACHE_HOME"]
	switch {
	case !ok:
		c.problem(f, "ProtectSystem=strict without XDG_CACHE_HOME: braid's cache (model hashes, streamed shards) would be under a read-only home")
	case !under(cache + "/braid"):
		c.problem(f, "XDG_CACHE_HOME=%s: %s/braid is not writable under ProtectSystem=strict (use CacheDirectory=)", cache, cache)
	}
	if hf, ok := env["HF_HOME"]; ok && !under(hf) {
		c.problem(f, "HF_HOME=%s is not writable under ProtectSystem=strict (use StateDirectory=)", hf)
	}
}

func contains(list []string, v string) bool { return slices.Contains(list, v) }

// execLine is an ExecStart line's executable.
var execLine = regexp.MustCompile(`(?m)^(ExecStart=[-@:+!]*)(\S+)`)

// verifyUnits runs `systemd-analyze verify` on copies of the units whose
// ExecStart runs the built braid instead of the installed path (verify
// wants the executable to exist); everything else is the unit as shipped.
// Any output is a problem: verify warns of an unknown directive and still
// exits 0.
func (c *checker) verifyUnits(units []*unit) error {
	for _, user := range []bool{false, true} {
		dir := filepath.Join(c.cfg.TempDir, "units-system")
		if user {
			dir = filepath.Join(c.cfg.TempDir, "units-user")
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		var paths []string
		byPath := map[string]*unit{}
		for _, u := range units {
			if u.user != user {
				continue
			}
			t, _ := c.file(u.file)
			text := execLine.ReplaceAllString(t.text, "${1}"+c.cfg.Braid)
			p := filepath.Join(dir, u.name)
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				return err
			}
			paths = append(paths, p)
			byPath[p] = u
		}
		if len(paths) == 0 {
			continue
		}
		args := []string{"verify"}
		env := os.Environ()
		if user {
			rt := filepath.Join(c.cfg.TempDir, "runtime")
			if err := os.MkdirAll(rt, 0o700); err != nil {
				return err
			}
			args = []string{"--user", "verify"}
			env = append(env, "XDG_RUNTIME_DIR="+rt)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, c.cfg.SystemdAnalyze, append(args, paths...)...)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		text := strings.TrimSpace(out.String())
		if err == nil && text == "" {
			continue
		}
		// Each line to the unit it names, else to every unit of the run.
		for _, line := range strings.Split(text, "\n") {
			hit := false
			for p, u := range byPath {
				if strings.Contains(line, p) || strings.HasPrefix(line, u.name+":") {
					c.problem(u.file, "systemd-analyze verify: %s", strings.ReplaceAll(line, p, u.file))
					hit = true
				}
			}
			if !hit && line != "" {
				for _, u := range byPath {
					c.problem(u.file, "systemd-analyze verify: %s", line)
				}
			}
		}
		if err != nil && text == "" {
			for _, u := range byPath {
				c.problem(u.file, "systemd-analyze verify failed: %v", err)
			}
		}
	}
	return nil
}
