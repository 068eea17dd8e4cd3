package sharedtest

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// skipForData is a skip whose message says it is for want of the shared
// data: such a test must call Missing, or BRAID_REQUIRE_TESTDATA=1 cannot
// turn it into a failure.
var skipForData = regexp.MustCompile(`\.Skip(f|Now)?\(.*(?i:shared|reference data|vocab test data|testdata)`)

// TestSkipsGoThroughMissing reads every test file of this module and fails
// on a skip that names the shared data but does not go through Missing.
// Nested modules (tests/browser) cannot import this package and are not
// read.
func TestSkipsGoThroughMissing(t *testing.T) {
	for line, want := range map[string]bool{
		`t.Skipf("shared test model absent (%v): skipping", err)`:     true,
		`tb.Skipf("vocab test data not available: %v", err)`:          true,
		`t.Skipf("reference data %s not available: %v", name, err)`:   true,
		`t.Skip("BRAID_KERNELS=generic")`:                             false,
		`sharedtest.Missing(t, "shared test model absent (%v)", err)`: false,
		`t.Skipf("qwen35 vocab not available: looked for %s", tried)`: false,
	} {
		if skipForData.MatchString(line) != want {
			t.Errorf("the pattern takes %q as a skip for shared data: %v, want %v", line, !want, want)
		}
	}
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root is not %s: %v", root, err)
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			// A line with a raw string is one of the examples above.
			if line := sc.Text(); skipForData.MatchString(line) && !strings.Contains(line, "`") {
				t.Errorf("%s:%d: a skip for missing shared data that does not go through sharedtest.Missing", path, n)
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
