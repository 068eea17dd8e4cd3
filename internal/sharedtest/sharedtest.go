// Package sharedtest is how tests reach the shared test data: the
// ../shared/testdata folder beside the repository (llama.cpp's outputs,
// reference quantizations, vocabularies, chat templates), which is not
// committed here. A test that cannot find what it needs there calls
// Missing, which skips it, or fails it when BRAID_REQUIRE_TESTDATA=1: CI
// sets that, so a run that lost its data fails loudly instead of passing
// with the comparisons against llama.cpp skipped.
//
// Only tests import this package.
package sharedtest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Env is the variable that turns a missing file into a failure (value 1).
const Env = "BRAID_REQUIRE_TESTDATA"

// Required reports whether the shared data must be present.
func Required() bool { return os.Getenv(Env) == "1" }

// Dir is the shared test data's directory. It is found from this source
// file's place in the checkout (internal/sharedtest), so every package's
// tests see the same folder however deep the package lies.
func Dir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("..", "..", "..", "shared", "testdata")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "testdata")
}

// Path is elem joined under Dir.
func Path(elem ...string) string { return filepath.Join(append([]string{Dir()}, elem...)...) }

// Missing ends tb because shared data it needs is missing: a skip with the
// message, or a failure with it when Required.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if Required() {
		tb.Fatalf("shared test data missing and "+Env+"=1: "+format, args...)
		return
	}
	tb.Skipf(format, args...)
}

// Need returns path when it exists, and otherwise ends tb as Missing does,
// naming the path and the error.
func Need(tb testing.TB, path string) string {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(tb, "%s absent (the shared test data lives beside the repository): %v", path, err)
	}
	return path
}
