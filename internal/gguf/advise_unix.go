//go:build unix && !linux

package gguf

import (
	"os"
)

// adviseHuge and dropCache are Linux's; elsewhere the copy is made without
// them (the page cache copy then ages out as usual).
func adviseHuge([]byte) {}

func dropCache(*os.File, int64, int64) {}
