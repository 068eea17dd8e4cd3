package validate

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case
	args string
	line int
}

type stage struct {
	image, name string
	instrs      []instruction
}

var dockerInstructions = map[string]bool{"FROM": true, "RUN": true, "CMD": true, "LABEL": true, "EXPOSE": true,
	"ENV": true, "ADD": true, "COPY": true, "ENTRYPOINT": true, "VOLUME": true, "USER": true, "WORKDIR": true,
	"ARG": true, "ONBUILD": true, "STOPSIGNAL": true, "HEALTHCHECK": true, "SHELL": true}

// parseDockerfile reads a Dockerfile into stages; instructions before the
// first FROM (global ARGs) go to a stage without image.
func parseDockerfile(text string) ([]stage, error) {
	stages := []stage{{}}
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(line, "#") {
			continue // a comment inside a continued instruction
		}
		if cur.Len() == 0 {
			start = n
		}
		if rest, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(line)
		full := strings.TrimSpace(cur.String())
		cur.Reset()
		cmd, args, _ := strings.Cut(full, " ")
		cmd = strings.ToUpper(cmd)
		if !dockerInstructions[cmd] {
			return nil, fmt.Errorf("line %d: unknown instruction %s", start, cmd)
		}
		in := instruction{cmd, strings.TrimSpace(args), start}
		if cmd == "FROM" {
			ws := strings.Fields(in.args)
			var img, name string
			for i := 0; i < len(ws); i++ {
				switch {
				case strings.HasPrefix(ws[i], "--"):
				case strings.EqualFold(ws[i], "AS") && i+1 < len(ws):
					name = ws[i+1]
					i++
				case img == "":
					img = ws[i]
				}
			}
			if img == "" {
				return nil, fmt.Errorf("line %d: FROM without an image", start)
			}
			stages = append(stages, stage{image: img, name: name})
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("the file ends inside a continued instruction")
	}
	if len(stages) < 2 {
		return nil, fmt.Errorf("no FROM")
	}
	return stages, nil
}

// goBuild is the build stage's `go build` command: its environment, its
// arguments and the binary it writes.
type goBuild struct {
	env, args []string
	out       string
}

var argRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// findGoBuild finds the RUN that builds ./cmd/braid and splits it into
// words, ARGs replaced by vals.
func findGoBuild(st stage, vals map[string]string) (*goBuild, error) {
	for _, in := range st.instrs {
		if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		ws, err := words(argRef.ReplaceAllStringFunc(in.args, func(m string) string {
			name := argRef.FindStringSubmatch(m)[1]
			if v, ok := vals[name]; ok {
				return v
			}
			return m
		}))
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", in.line, err)
		}
		b := &goBuild{}
		i := 0
		for ; i < len(ws) && strings.Contains(ws[i], "=") && !strings.HasPrefix(ws[i], "-"); i++ {
			b.env = append(b.env, ws[i])
		}
		if i+1 >= len(ws) || ws[i] != "go" || ws[i+1] != "build" {
			return nil, fmt.Errorf("line %d: RUN %s: want `VAR=... go build ...` alone (no shell operators)", in.line, in.args)
		}
		b.args = ws[i+1:]
		for j := 0; j+1 < len(b.args); j++ {
			if b.args[j] == "-o" {
				b.out = b.args[j+1]
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("no RUN with go build")
}

// container checks the image recipes: the Dockerfile, its ignore file and
// ko's configuration.
func (c *checker) container() error {
	df, ok := c.file("container/Dockerfile")
	if !ok {
		c.problem("container/", "no Dockerfile")
		return nil
	}
	stages, err := parseDockerfile(df.text)
	if err != nil {
		c.problem(df.name, "%v", err)
		return nil
	}
	st := stages[1:]
	build, final := st[0], st[len(st)-1]
	if len(st) < 2 {
		c.problem(df.name, "one stage: the image should hold the binary alone, built in a stage of its own")
		return nil
	}
	// The build stage: a Go at least go.mod's, CGO off, -trimpath.
	if v, ok := strings.CutPrefix(build.image, "golang:"); !ok {
		c.problem(df.name, "the build stage is %s, not golang:VERSION", build.image)
	} else if want, err := goModVersion(c.cfg.Repo); err != nil {
		return err
	} else if !versionAtLeast(v, want) {
		c.problem(df.name, "golang:%s is older than go.mod's go %s", v, want)
	}
	declared := map[string]bool{}
	for _, s := range []stage{stages[0], build} {
		for _, in := range s.instrs {
			if in.cmd == "ARG" || in.cmd == "ENV" {
				name, _, _ := strings.Cut(in.args, "=")
				if ws := strings.Fields(name); len(ws) > 0 {
					declared[ws[0]] = true
				}
			}
		}
	}
	gb, err := findGoBuild(build, nil)
	if err != nil {
		c.problem(df.name, "build stage: %v", err)
		return nil
	}
	for _, w := range append(append([]string{}, gb.env...), gb.args...) {
		for _, m := range argRef.FindAllStringSubmatch(w, -1) {
			if !declared[m[1]] {
				c.problem(df.name, "the go build uses $%s, which no ARG or ENV of its stage declares", m[1])
			}
		}
	}
	if !contains(gb.env, "CGO_ENABLED=0") {
		c.problem(df.name, "the go build lacks CGO_ENABLED=0: the binary would need a C library the distroless static base has not")
	}
	if !contains(gb.args, "-trimpath") {
		c.problem(df.name, "the go build lacks -trimpath (reproducible builds, no build paths in the binary)")
	}
	if !contains(gb.args, "./cmd/braid") {
		c.problem(df.name, "the go build does not build ./cmd/braid")
	}
	if gb.out == "" {
		c.problem(df.name, "the go build has no -o: the next stage cannot name the binary")
	}
	// The final stage: distroless static, the binary, its entrypoint.
	if !strings.HasPrefix(final.image, "gcr.io/distroless/static") {
		c.problem(df.name, "the final stage is %s: the static binary needs nothing but a distroless static base", final.image)
	}
	dest := ""
	entry := ""
	for _, in := range final.instrs {
		switch in.cmd {
		case "COPY":
			ws := strings.Fields(in.args)
			from := ""
			var rest []string
			for _, w := range ws {
				if v, ok := strings.CutPrefix(w, "--from="); ok {
					from = v
				} else if !strings.HasPrefix(w, "--") {
					rest = append(rest, w)
				}
			}
			if (from == build.name || from == "0") && len(rest) == 2 && rest[0] == gb.out {
				dest = rest[1]
				if strings.HasSuffix(dest, "/") {
					dest += path.Base(gb.out)
				}
			}
		case "ENTRYPOINT":
			var ep []string
			if err := json.Unmarshal([]byte(in.args), &ep); err != nil || len(ep) == 0 {
				c.problem(df.name, "line %d: ENTRYPOINT %s is not the exec form [\"/path\", ...] (the base has no shell)", in.line, in.args)
				continue
			}
			entry = ep[0]
		}
	}
	switch {
	case dest == "":
		c.problem(df.name, "the final stage does not COPY --from=%s %s", build.name, gb.out)
	case entry != dest:
		c.problem(df.name, "ENTRYPOINT %q is not the binary copied to %s", entry, dest)
	case path.Base(dest) != "braid" || !contains([]string{"/usr/local/bin", "/usr/bin", "/bin"}, path.Dir(dest)):
		c.problem(df.name, "the binary is at %s: the manifests run `braid` from the PATH (/usr/local/bin/braid)", dest)
	}
	if ig, ok := c.file("container/Dockerfile.dockerignore"); ok {
		if _, err := ignorePatterns(ig.text); err != nil {
			c.problem(ig.name, "%v", err)
		}
	} else {
		c.problem(df.name, "no Dockerfile.dockerignore: the whole repository (models, node_modules) would be the build context")
	}
	c.koConfig(final.image, dest)
	return nil
}

// koYAML is ko's .ko.yaml, the fields these files may use.
type koYAML struct {
	DefaultBaseImage    string            `json:"defaultBaseImage,omitempty"`
	BaseImageOverrides  map[string]string `json:"baseImageOverrides,omitempty"`
	DefaultPlatforms    []string          `json:"defaultPlatforms,omitempty"`
	DefaultAppDirectory string            `json:"defaultAppDirectory,omitempty"`
	DefaultEnv          []string          `json:"defaultEnv,omitempty"`
	DefaultFlags        []string          `json:"defaultFlags,omitempty"`
	DefaultLdflags      []string          `json:"defaultLdflags,omitempty"`
	Builds              []struct {
		ID      string   `json:"id,omitempty"`
		Dir     string   `json:"dir,omitempty"`
		Main    string   `json:"main,omitempty"`
		Env     []string `json:"env,omitempty"`
		Flags   []string `json:"flags,omitempty"`
		Ldflags []string `json:"ldflags,omitempty"`
	} `json:"builds,omitempty"`
}

// koConfig: ko builds the same image as the Dockerfile: same base, same
// flags, the binary at the same path.
func (c *checker) koConfig(base, dest string) {
	f, ok := c.file("container/.ko.yaml")
	if !ok {
		c.problem("container/", "no .ko.yaml (the daemonless build)")
		return
	}
	var k koYAML
	if errs := decodeStrict(f.text, &k); len(errs) > 0 {
		for _, e := range errs {
			c.problem(f.name, "%v", e)
		}
		return
	}
	if k.DefaultBaseImage != base {
		c.problem(f.name, "defaultBaseImage %q, the Dockerfile's base is %q", k.DefaultBaseImage, base)
	}
	appDir := k.DefaultAppDirectory
	if appDir == "" {
		appDir = "/ko-app"
	}
	if dest != "" && path.Join(appDir, "braid") != dest {
		c.problem(f.name, "ko puts braid at %s, the Dockerfile's image at %s: the manifests' command must find it in both", path.Join(appDir, "braid"), dest)
	}
	found := false
	for _, b := range k.Builds {
		dir := b.Dir
		if dir == "" {
			dir = "."
		}
		if path.Clean(path.Join(dir, b.Main)) != "cmd/braid" {
			continue
		}
		found = true
		env, flags := b.Env, b.Flags
		if env == nil {
			env = k.DefaultEnv
		}
		if flags == nil {
			flags = k.DefaultFlags
		}
		if !contains(env, "CGO_ENABLED=0") {
			c.problem(f.name, "build %s: no CGO_ENABLED=0 in env", b.ID)
		}
		if !contains(flags, "-trimpath") {
			c.problem(f.name, "build %s: flags replace ko's default -trimpath without it", b.ID)
		}
	}
	if !found {
		c.problem(f.name, "no build of ./cmd/braid")
	}
}

// goModVersion is the go directive of the repository's go.mod.
func goModVersion(repo string) (string, error) {
	b, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^go ([0-9.]+)`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("go.mod has no go directive")
	}
	return string(m[1]), nil
}

// versionAtLeast compares an image tag's Go version (1.26, 1.26.1,
// 1.26-bookworm) with go.mod's, by major and minor.
func versionAtLeast(tag, want string) bool {
	num := func(s string) (int, int) {
		s, _, _ = strings.Cut(s, "-")
		p := strings.Split(s, ".")
		if len(p) < 2 {
			return -1, -1
		}
		a, err1 := strconv.Atoi(p[0])
		b, err2 := strconv.Atoi(p[1])
		if err1 != nil || err2 != nil {
			return -1, -1
		}
		return a, b
	}
	ta, tb := num(tag)
	wa, wb := num(want)
	return ta > wa || ta == wa && tb >= wb && ta >= 0
}

// ignorePatterns reads a .dockerignore.
func ignorePatterns(text string) ([]string, error) {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "!") {
			return nil, fmt.Errorf("%s: exceptions are not something deploy/validate copies a context with", l)
		}
		if _, err := path.Match(strings.ReplaceAll(l, "**/", ""), "x"); err != nil {
			return nil, fmt.Errorf("pattern %q: %v", l, err)
		}
		out = append(out, path.Clean(strings.TrimPrefix(l, "/")))
	}
	return out, nil
}

// ignored reports whether rel (slash-separated) is left out of the context:
// a pattern matches it or a folder above it; "**/" matches any depth.
func ignored(patterns []string, rel string) bool {
	parts := strings.Split(rel, "/")
	for _, p := range patterns {
		deep, pat := false, p
		for strings.HasPrefix(pat, "**/") {
			deep, pat = true, pat[3:]
		}
		for end := 1; end <= len(parts); end++ {
			starts := []int{0}
			if deep {
				starts = starts[:0]
				for s := 0; s < end; s++ {
					starts = append(starts, s)
				}
			}
			for _, s := range starts {
				if ok, _ := path.Match(pat, strings.Join(parts[s:end], "/")); ok {
					return true
				}
			}
		}
	}
	return false
}

// BuildBraid builds braid as deploy/container/Dockerfile does: from a copy
// of the build context (the repository less what Dockerfile.dockerignore
// leaves out), with the build stage's own `go build` command, into out. It
// then checks that the binary is static (no interpreter, no shared
// libraries: the distroless static base has none) and that the revision
// passed by -ldflags reaches `braid --version`.
func BuildBraid(repo, deploy, out string) error {
	df, err := os.ReadFile(filepath.Join(deploy, "container", "Dockerfile"))
	if err != nil {
		return err
	}
	stages, err := parseDockerfile(string(df))
	if err != nil {
		return fmt.Errorf("Dockerfile: %v", err)
	}
	const revision = "validate" // versions print 12 characters of a revision
	gb, err := findGoBuild(stages[1], map[string]string{"REVISION": revision})
	if err != nil {
		return fmt.Errorf("Dockerfile: %v", err)
	}
	ig, err := os.ReadFile(filepath.Join(deploy, "container", "Dockerfile.dockerignore"))
	if err != nil {
		return err
	}
	patterns, err := ignorePatterns(string(ig))
	if err != nil {
		return fmt.Errorf("Dockerfile.dockerignore: %v", err)
	}
	ctxDir, err := os.MkdirTemp("", "braid-context-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ctxDir)
	if err := copyContext(repo, ctxDir, patterns); err != nil {
		return err
	}
	args := append([]string{}, gb.args...)
	for i := range args {
		if i > 0 && args[i-1] == "-o" {
			args[i] = out
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = ctxDir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), gb.env...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the Dockerfile's build (%s go %s) in its context failed: %v\n%s", strings.Join(gb.env, " "), strings.Join(args, " "), err, log.String())
	}
	if err := static(out); err != nil {
		return err
	}
	v, err := exec.CommandContext(ctx, out, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %v: %s", out, err, v)
	}
	if !strings.Contains(string(v), revision) {
		return fmt.Errorf("the Dockerfile passes the revision with -ldflags, but `braid --version` does not show it (%q): the -X variable is wrong", strings.TrimSpace(string(v)))
	}
	return nil
}

// copyContext copies the regular files of src that the patterns leave in.
func copyContext(src, dst string, patterns []string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		if ignored(patterns, filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		o, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(o, in); err != nil {
			o.Close()
			return err
		}
		return o.Close()
	})
}

// static fails for an ELF binary that needs a dynamic loader or libraries.
func static(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s has a dynamic loader (PT_INTERP): it would not run on distroless static", bin)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return err
	}
	if len(libs) > 0 {
		return fmt.Errorf("%s needs shared libraries %v: it would not run on distroless static", bin, libs)
	}
	return nil
}
