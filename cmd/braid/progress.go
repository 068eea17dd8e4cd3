package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"braid/internal/gguf"
	"braid/internal/sysinfo"
)

// isTerminal reports whether w is a character device (a terminal), where a
// progress line can be redrawn in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// prefault reads every page of the model's tensors once, so the first
// request does not pay for the disk, and shows how far it got on a terminal:
// on a slow disk a 60 GB model takes minutes, and a silent wait looks hung.
func prefault(m *gguf.Model, stderr io.Writer) {
	total := m.Size()
	show := isTerminal(stderr) && total > 256<<20
	var done int64
	var sink byte
	last := time.Now()
	for _, t := range m.Tensors {
		for off := 0; off < len(t.Data); off += 4096 {
			sink += t.Data[off]
		}
		done += t.Size
		if show && time.Since(last) > 200*time.Millisecond {
			last = time.Now()
			fmt.Fprintf(stderr, "\rloading %s: %3.0f%% (%s of %s)", m.Files[0].Path, 100*float64(done)/float64(total),
				sysinfo.FormatBytes(uint64(done)), sysinfo.FormatBytes(uint64(total)))
		}
	}
	if show {
		fmt.Fprintf(stderr, "\rloading %s: done (%s)%20s\n", m.Files[0].Path, sysinfo.FormatBytes(uint64(total)), "")
	}
	// The sum is never read, so without this the compiler may drop the
	// loads that fault the pages in.
	runtime.KeepAlive(sink)
}

// loadProgress shows on a terminal how far read mode's copy of a large
// model got (nil elsewhere: a log gets only the final line).
func loadProgress(path string, stderr io.Writer) func(done, total int64) {
	if !isTerminal(stderr) {
		return nil
	}
	var last time.Time
	return func(done, total int64) {
		if total <= 256<<20 {
			return
		}
		if done < total && time.Since(last) < 200*time.Millisecond {
			return
		}
		last = time.Now()
		fmt.Fprintf(stderr, "\rreading %s: %3.0f%% (%s of %s)", path, 100*float64(done)/float64(total),
			sysinfo.FormatBytes(uint64(done)), sysinfo.FormatBytes(uint64(total)))
		if done == total {
			fmt.Fprintln(stderr)
		}
	}
}
