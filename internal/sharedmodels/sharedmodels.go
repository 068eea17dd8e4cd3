// Package sharedmodels finds the models under the shared test data that
// the tests can run: those whose architecture internal/model supports. A
// model of an architecture an open issue is still to add is listed as
// pending (tests log it); one of any other architecture is an error, so a
// new family in the shared data never goes untested unnoticed.
package sharedmodels

import (
	"fmt"
	"path/filepath"
	"sort"

	"braid/internal/gguf"
)

// Pending are the architectures in the shared data that braid does not run
// yet, with the issue that adds them.
var Pending = map[string]string{}

// Files globs dir/*/*.gguf and splits the files into those whose
// architecture supported accepts (model.IsSupported; passed in so that the
// model package's own tests can use this one) and those pending (as "file:
// arch, issue" lines).
func Files(dir string, supported func(arch string) bool) (run, pending []string, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.gguf"))
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(files)
	for _, f := range files {
		arch, err := Arch(f)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case supported(arch):
			run = append(run, f)
		case Pending[arch] != "":
			pending = append(pending, fmt.Sprintf("%s: %s, %s", filepath.Base(f), arch, Pending[arch]))
		default:
			return nil, nil, fmt.Errorf("%s: architecture %q is neither supported nor pending an issue", f, arch)
		}
	}
	return run, pending, nil
}

// Arch reads a GGUF file's general.architecture.
func Arch(path string) (string, error) {
	m, err := gguf.Open(path)
	if err != nil {
		return "", err
	}
	defer m.Close()
	return m.Arch(), nil
}
