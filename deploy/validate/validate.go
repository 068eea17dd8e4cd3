// Package validate checks braid's deployment files (the deploy/ folder)
// offline, the way the engines that read them would, and against the braid
// binary they run:
//
//   - every Kubernetes YAML document is decoded strictly (unknown or
//     mis-cased fields, duplicate keys) into its typed API object by
//     apiVersion and kind; LeaderWorkerSet, PodMonitor and Kustomization,
//     whose modules are not used here, by small structs of ours, their pod
//     templates as core/v1 PodTemplateSpecs; an unknown kind is an error;
//   - every braid command line (container args, ExecStart, the README's
//     examples) uses flags that `braid <command> -h` lists, with values of
//     their type;
//   - the parts agree: probes and Services name declared ports, the listen
//     flags use those ports, the secret file is a mounted Secret's key,
//     terminationGracePeriodSeconds and TimeoutStopSec exceed --grace, DNS
//     discovery names a headless Service of the workers with a port named
//     braid, Prometheus keeps exactly the leaders' API ports;
//   - the systemd units pass `systemd-analyze verify`;
//   - the container recipe builds a static binary from its build context.
//
// It is a module of its own so that braid does not depend on Kubernetes'.
package validate

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Config says what to check and with what.
type Config struct {
	// Deploy is the folder of deployment files (deploy/).
	Deploy string
	// Repo is the repository root: go.mod, cmd/braid, the paths the files
	// name.
	Repo string
	// Braid is a built braid binary; its -h output says which flags exist.
	Braid string
	// SystemdAnalyze is systemd-analyze's path; empty skips `verify` (the
	// caller decides whether that is allowed).
	SystemdAnalyze string
	// TempDir holds the copies of the units that systemd-analyze reads.
	TempDir string
}

// Problem is one thing wrong with a deployment file.
type Problem struct {
	File string // relative to Config.Deploy
	Msg  string
}

func (p Problem) String() string { return p.File + ": " + p.Msg }

// skipDirs are folders of deploy/ that hold no deployment files: this
// module.
var skipDirs = map[string]bool{"validate": true}

// Check checks every file under cfg.Deploy. The error is for a check that
// could not run (braid's help unreadable, a file unreadable); what is wrong
// with the files is in the problems.
func Check(cfg Config) ([]Problem, error) {
	c := &checker{cfg: cfg, flagSets: map[string]*flagSet{}, claimed: map[string]bool{},
		secretsMade: map[string]map[string]bool{}}
	var files []string
	err := filepath.WalkDir(cfg.Deploy, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(cfg.Deploy, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDirs[rel] {
				return filepath.SkipDir
			}
			return nil
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(cfg.Deploy, f))
		if err != nil {
			return nil, err
		}
		c.text = append(c.text, fileText{f, string(b)})
	}
	steps := []func() error{
		c.kubernetes, c.systemd, c.prometheus, c.container, c.readme, c.paths,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return c.problems, err
		}
	}
	c.crossChecks()
	for _, f := range files {
		if !c.claimed[f] {
			c.problem(f, "no check covers this file: teach deploy/validate what it is, or remove it")
		}
	}
	return c.problems, nil
}

type fileText struct{ name, text string }

// checker gathers what the files declare, then checks it as a whole.
type checker struct {
	cfg      Config
	text     []fileText
	problems []Problem
	claimed  map[string]bool
	flagSets map[string]*flagSet

	pods        []*pod
	services    []*service
	lwsSets     []*lwsInfo
	podMonitors []podMonitorAt
	// secretsMade: Secret name -> its keys, from a secretGenerator, a
	// Secret document or the README's `kubectl create secret` line.
	secretsMade map[string]map[string]bool
	secretsUsed []secretUse
	// serveListen: the ports braid serve listens on under systemd.
	serveListen []int
	images      map[string][]string // flavour folder -> images of its braid containers
}

func (c *checker) problem(file, format string, args ...any) {
	c.problems = append(c.problems, Problem{File: file, Msg: fmt.Sprintf(format, args...)})
}

// files returns the files whose relative path matches re, and claims them.
func (c *checker) files(re string) []fileText {
	r := regexp.MustCompile(re)
	var out []fileText
	for _, f := range c.text {
		if r.MatchString(f.name) {
			out = append(out, f)
			c.claimed[f.name] = true
		}
	}
	return out
}

func (c *checker) file(name string) (fileText, bool) {
	for _, f := range c.text {
		if f.name == name {
			c.claimed[name] = true
			return f, true
		}
	}
	return fileText{}, false
}

// pathRoots are the repository's folders whose paths the deployment files
// mention.
var pathRoots = []string{"deploy/", "docs/", "cmd/", "scripts/"}

// paths checks that every path into the repository that a deployment file
// mentions exists (a renamed file leaves no stale instruction behind).
func (c *checker) paths() error {
	for _, f := range c.text {
		words := strings.FieldsFunc(f.text, func(r rune) bool {
			return r == ' ' || r == '\t' || r == '\n' || strings.ContainsRune("`\"'()[]<>,=", r)
		})
		for _, w := range words {
			if strings.Contains(w, "://") {
				continue
			}
			for strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../") {
				w = w[strings.Index(w, "/")+1:]
			}
			w = strings.TrimRight(w, ".:;")
			if !slices.ContainsFunc(pathRoots, func(r string) bool { return strings.HasPrefix(w, r) }) {
				continue
			}
			// kubectl's deploy/NAME (a Deployment), not a path.
			if rest, ok := strings.CutPrefix(w, "deploy/"); ok && !strings.ContainsAny(rest, "./") {
				continue
			}
			p := strings.TrimSuffix(w, "/")
			if _, err := os.Stat(filepath.Join(c.cfg.Repo, filepath.FromSlash(p))); err == nil {
				continue
			}
			// Under deploy/ the checked folder stands for the repository's
			// (the negative tests check a copy of it).
			if rest, ok := strings.CutPrefix(p, "deploy/"); ok {
				if _, err := os.Stat(filepath.Join(c.cfg.Deploy, filepath.FromSlash(rest))); err == nil {
					continue
				}
				// A file the instructions tell the user to create.
				if c.userMade(rest) {
					continue
				}
			}
			c.problem(f.name, "names %s, which does not exist", p)
		}
	}
	return nil
}

// userMade reports whether rel (under deploy/) is a file the user writes
// before using the folder, one that a .gitignore beside it keeps out of the
// repository.
func (c *checker) userMade(rel string) bool {
	dir, base := filepath.Split(rel)
	ig, err := os.ReadFile(filepath.Join(c.cfg.Deploy, dir, ".gitignore"))
	if err != nil {
		return false
	}
	return slices.Contains(strings.Fields(string(ig)), base)
}
