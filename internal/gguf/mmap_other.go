//go:build !unix

package gguf

import "os"

// mapFile reads the whole file where no mmap is wired up; the views then
// point into an ordinary heap copy.
func mapFile(path string) ([]byte, error) { return os.ReadFile(path) }

func unmapFile([]byte) error { return nil }
