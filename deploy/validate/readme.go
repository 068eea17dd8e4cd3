package validate

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	mdLink     = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	secretLine = regexp.MustCompile(`kubectl create secret generic (\S+)((?: +--from-file=\S+)+)`)
	braidLine  = regexp.MustCompile(`^(?:\./bin/|bin/|/usr/local/bin/)?braid ((?:serve|worker|plan)\b.*)$`)
)

// readme checks deploy/README.md: its links lead to files, the Secret it
// tells the user to create is the one the manifests mount, and its braid
// command lines use flags braid has.
func (c *checker) readme() error {
	f, ok := c.file("README.md")
	if !ok {
		c.problem("README.md", "missing: deploy/ needs its instructions")
		return nil
	}
	for _, m := range mdLink.FindAllStringSubmatch(f.text, -1) {
		link := m[1]
		if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
			continue
		}
		target := filepath.Join(c.cfg.Deploy, filepath.FromSlash(link))
		if strings.HasPrefix(link, "../") {
			target = filepath.Join(c.cfg.Repo, filepath.FromSlash(strings.TrimPrefix(link, "../")))
		}
		if _, err := os.Stat(target); err != nil {
			c.problem(f.name, "links to %s, which does not exist", link)
		}
	}
	for _, m := range secretLine.FindAllStringSubmatch(f.text, -1) {
		keys := map[string]bool{}
		for _, ff := range strings.Fields(m[2]) {
			v := strings.TrimPrefix(ff, "--from-file=")
			key, _, ok := strings.Cut(v, "=")
			if !ok {
				key = path.Base(v)
			}
			keys[key] = true
		}
		if old, ok := c.secretsMade[m[1]]; ok && !sameKeys(old, keys) {
			c.problem(f.name, "`kubectl create secret generic %s` makes keys %v; the secretGenerator makes %v", m[1], keys, old)
		}
		c.secretsMade[m[1]] = keys
	}
	// Command lines in code blocks (indented or fenced), continuation
	// lines joined.
	inFence := false
	var pending string
	for _, line := range strings.Split(f.text, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "```") {
			inFence = !inFence
			continue
		}
		if !inFence && !strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "\t") {
			pending = ""
			continue
		}
		if rest, ok := strings.CutSuffix(t, "\\"); ok {
			pending += rest + " "
			continue
		}
		cmd := strings.TrimSpace(pending + t)
		pending = ""
		cmd = strings.TrimPrefix(cmd, "$ ")
		m := braidLine.FindStringSubmatch(cmd)
		if m == nil {
			continue
		}
		ws, err := words(m[1])
		if err != nil {
			c.problem(f.name, "%s: %v", cmd, err)
			continue
		}
		if _, err := c.parseBraid(f.name, "`braid "+m[1]+"`", ws); err != nil {
			return err
		}
	}
	return nil
}

func sameKeys(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
