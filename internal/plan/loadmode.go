package plan

import (
	"fmt"

	"braid/internal/gguf"
)

// LoadModes is --load-mode's usage text.
const LoadModes = "how the weights are held: auto (read when they and the KV cache fit in memory with room to spare, else mmap), " +
	"mmap (mapped from the file: the page cache, which the kernel may reclaim and re-read), " +
	"read (copied into anonymous memory: reclaim of file pages cannot take them), " +
	"mlock (mapped and locked in memory; needs RLIMIT_MEMLOCK above the model's size)"

// ParseLoadMode reads --load-mode: auto (auto true) or a mode gguf holds.
func ParseLoadMode(s string) (mode gguf.LoadMode, auto bool, err error) {
	if s == "auto" {
		return gguf.LoadMmap, true, nil
	}
	if mode, err = gguf.ParseLoadMode(s); err != nil {
		return 0, false, fmt.Errorf("--load-mode %q: want auto, mmap, read or mlock", s)
	}
	return mode, false, nil
}

// LoadFacts are what the choice of a rank's load mode depends on, in
// bytes.
type LoadFacts struct {
	// File is the size of the model's files: what read mode holds.
	File int64
	// Weights is what the rank reads of them (what mmap pages in).
	Weights int64
	// Other is the rest of the rank's need: KV cache and scratch.
	Other int64
	// Usable is the memory the node can give now; 0 means unknown.
	Usable int64
	// InMemoryFS says the files are on tmpfs or ramfs: mapping them takes
	// no memory beyond theirs, which is not in Usable.
	InMemoryFS bool
	// Repack is the part of Weights repacked at load for this CPU's
	// kernels (model.RepackBytes): new memory. In mmap mode it replaces
	// the mapped pages it was copied from, which are dropped; read mode
	// keeps its copy of the file beside it, mlock its locked mapping.
	Repack int64
}

// Held is the memory the rank's weights take beyond what is already in
// memory, in mode: read holds a private copy of the files, mmap and mlock
// the pages the rank reads (none more when the file is on tmpfs).
func (f LoadFacts) Held(mode gguf.LoadMode) int64 {
	switch {
	case mode == gguf.LoadRead:
		return f.File + f.Repack
	case f.InMemoryFS:
		return f.Repack
	case mode == gguf.LoadMlock:
		return f.Weights + f.Repack
	}
	return f.Weights
}

// Need is the rank's whole memory need in mode.
func (f LoadFacts) Need(mode gguf.LoadMode) int64 { return f.Held(mode) + f.Other }

// Margin is the room auto leaves free when it reads: a tenth of what is
// usable, at least 256 MiB, for the runtime, the server and the rest of
// the node.
func (f LoadFacts) Margin() int64 { return max(f.Usable/10, 256<<20) }

// LoadChoice is the mode a rank loads its weights in, and why.
type LoadChoice struct {
	Mode gguf.LoadMode
	// Auto says auto chose the mode; Reason says why, or that it was
	// asked for.
	Auto   bool
	Reason string
}

func (c LoadChoice) String() string { return c.Mode.String() + " (" + c.Reason + ")" }

// minShare is the share of the file a rank must read for auto to copy the
// whole file: below it (a shard of a larger model) a copy would hold bytes
// the rank never reads, while mmap pages in only those it does.
const minShare = 0.8

// ChooseLoad resolves --load-mode for a rank. Asked modes are kept; auto
// reads into anonymous memory when that is safe and useful, mmap
// otherwise: the files already in memory (tmpfs), the rank reading only a
// part of them, memory unknown, or the copy not fitting with the margin.
func ChooseLoad(mode gguf.LoadMode, auto bool, f LoadFacts) LoadChoice {
	if !auto {
		return LoadChoice{Mode: mode, Reason: "--load-mode " + mode.String()}
	}
	c := LoadChoice{Mode: gguf.LoadMmap, Auto: true}
	switch {
	case f.InMemoryFS:
		c.Reason = "auto: the file is on tmpfs or ramfs and already in memory; a copy would hold it twice"
	case f.File > 0 && float64(f.Weights) < minShare*float64(f.File):
		c.Reason = fmt.Sprintf("auto: this rank reads %s of the file's %s; mmap pages in only those, a copy would hold all", Bytes(f.Weights), Bytes(f.File))
	case f.Usable <= 0:
		c.Reason = "auto: this node's free memory is unknown"
	case f.Need(gguf.LoadRead)+f.Margin() > f.Usable:
		c.Reason = fmt.Sprintf("auto: a copy (%s) with the KV cache and scratch (%s) would leave less than %s of the %s usable",
			Bytes(f.File), Bytes(f.Other), Bytes(f.Margin()), Bytes(f.Usable))
	default:
		c.Mode = gguf.LoadRead
		c.Reason = fmt.Sprintf("auto: the weights (%s) with the KV cache and scratch (%s) fit in the %s usable; in anonymous memory, reclaim of file pages cannot drop them",
			Bytes(f.File), Bytes(f.Other), Bytes(f.Usable))
	}
	return c
}
