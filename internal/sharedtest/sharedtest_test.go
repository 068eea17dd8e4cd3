package sharedtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how a test would end.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = format
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
}

// TestMissing: without the variable a missing file skips; with
// BRAID_REQUIRE_TESTDATA=1 it fails; a file that exists does neither.
func TestMissing(t *testing.T) {
	absent := filepath.Join(t.TempDir(), "absent.gguf")
	for _, tc := range []struct {
		env          string
		skip, failed bool
	}{{"", true, false}, {"0", true, false}, {"1", false, true}} {
		t.Setenv(Env, tc.env)
		var r recorder
		Need(&r, absent)
		if (r.skipped != "") != tc.skip || (r.failed != "") != tc.failed {
			t.Errorf("%s=%q: skipped %q, failed %q", Env, tc.env, r.skipped, r.failed)
		}
		if tc.failed && !strings.Contains(r.failed, Env) {
			t.Errorf("the failure does not name %s: %q", Env, r.failed)
		}
		var ok recorder
		if got := Need(&ok, t.TempDir()); got == "" || ok.skipped != "" || ok.failed != "" {
			t.Errorf("%s=%q: an existing path ended the test (%q, %q)", Env, tc.env, ok.skipped, ok.failed)
		}
	}
}

// TestDir: Dir is the folder beside the checkout, as the tests' relative
// paths (../../../shared/testdata from a package two levels down) name it.
func TestDir(t *testing.T) {
	want, err := filepath.Abs("../../../shared/testdata")
	if err != nil {
		t.Fatal(err)
	}
	got, err := filepath.Abs(Dir())
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Dir() = %s, want %s", got, want)
	}
	if _, err := os.Stat(got); err != nil {
		Missing(t, "no shared test data: %v", err)
	}
}
