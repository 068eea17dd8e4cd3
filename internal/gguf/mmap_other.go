//go:build !unix

package gguf

import (
	"errors"
	"fmt"
	"os"
)

// mapFile reads the whole file where no mmap is wired up; the views then
// point into an ordinary heap copy.
func mapFile(path string) ([]byte, error) { return os.ReadFile(path) }

// readAnon is the same heap copy: there is no mapping to replace.
func readAnon(path string, _ func(int64)) ([]byte, error) { return os.ReadFile(path) }

func unmapFile([]byte) error { return nil }

func lockMapping(path string, b []byte) error {
	return fmt.Errorf("gguf: %s: %w", path, errors.New("--load-mode mlock is supported on Unix systems only; use read"))
}

func unlockMapping([]byte) {}

func dropMapped([]byte) {}
