package model

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"braid/internal/gguf"
	"braid/internal/kernels"
)

// RepackStats says what loading repacked for this CPU's kernels
// (kernels.LayoutFor): the matrices, their bytes, the wall time from the
// first matrix's repacking to the last one's end (binding ran beside it),
// and the part of it after the binding was done.
type RepackStats struct {
	Matrices   int
	Bytes      int64
	Took, Wait time.Duration
	// Prepacked counts the matrices a shard file held in layout
	// PrepackedAs already (braid split --layout), bound as they are.
	Prepacked   int
	PrepackedAs kernels.Layout
}

// repacker fills the repacked copies of a binding's linear layers on
// several threads while the binding goes on, and drops each source's
// mapped pages once its copy is written, so that a load's resident
// memory stays near the model's bytes plus the tensors in flight.
type repacker struct {
	file *gguf.Model
	wg   sync.WaitGroup
	sem  chan struct{}
	// done maps a source's first byte and length to its copy: the tied
	// output and an MTP head may bind the same rows twice.
	done  map[srcKey]kernels.Matrix
	stats RepackStats
	start time.Time // the first matrix's
}

type srcKey struct {
	p *byte
	n int
}

func newRepacker(f *gguf.Model) *repacker {
	return &repacker{file: f, sem: make(chan struct{}, runtime.NumCPU()), done: map[srcKey]kernels.Matrix{}}
}

// linear returns m in the layout this CPU's kernels want, its copy being
// filled in the background. The source's pages are dropped once copied
// (mmap mode): a reader of the same bytes (a tied head's embedding rows,
// a coordinator streaming a shard) has them mapped back from the page
// cache.
func (r *repacker) linear(m kernels.Matrix) kernels.Matrix {
	if r == nil || len(m.Data) == 0 {
		return m
	}
	l := kernels.LayoutFor(m.Type)
	if l == kernels.Plain {
		return m
	}
	key := srcKey{unsafe.SliceData(m.Data), len(m.Data)}
	if out, ok := r.done[key]; ok {
		return out
	}
	out, fill, ok := kernels.PrepareRepack(m, l)
	if !ok {
		return m
	}
	if r.stats.Matrices == 0 {
		r.start = time.Now()
	}
	r.done[key] = out
	r.stats.Matrices++
	r.stats.Bytes += int64(len(out.Data))
	// Pieces of about repackPiece bytes, each dropping its source pages
	// once written: the load's resident set then grows by the pieces in
	// flight, not by whole tensors (an output head is hundreds of MiB).
	rb := len(m.Data) / m.Rows
	step := max(8, repackPiece/rb/8*8)
	for r0 := 0; r0 < m.Rows; r0 += step {
		r1 := min(r0+step, m.Rows)
		src := m.Data[r0*rb : r1*rb]
		r.wg.Add(1)
		r.sem <- struct{}{}
		go func() {
			defer r.wg.Done()
			fill(r0, r1)
			r.file.DropPages(src)
			<-r.sem
		}()
	}
	return out
}

// repackPiece is the bytes of one repacking job.
const repackPiece = 4 << 20

// wait returns when every copy is written.
func (r *repacker) wait() RepackStats {
	if r == nil {
		return RepackStats{}
	}
	t := time.Now()
	r.wg.Wait()
	if r.stats.Matrices > 0 {
		r.stats.Wait = time.Since(t)
		r.stats.Took = time.Since(r.start)
	}
	return r.stats
}

// String is the load log's line: what was repacked, for which kernels,
// or why nothing was.
func (s RepackStats) String() string {
	var kinds []string
	for _, c := range kernels.PackedSelected() {
		kinds = append(kinds, fmt.Sprintf("%s %s (%s)", c.Type, c.Layout, c.Impl))
	}
	if s.Prepacked > 0 {
		pre := fmt.Sprintf("%d matrices in the shard file's %s layout", s.Prepacked, s.PrepackedAs.Versioned())
		if s.Matrices == 0 {
			return pre + " (none repacked at load); this CPU's kernels take " + strings.Join(kinds, ", ")
		}
		return fmt.Sprintf("%s, %d more (%d MiB) repacked at load in %.2fs; this CPU's kernels take %s",
			pre, s.Matrices, s.Bytes>>20, s.Took.Seconds(), strings.Join(kinds, ", "))
	}
	if s.Matrices == 0 {
		if len(kinds) == 0 {
			return "weights in the file's layout (no repacked kernels for this CPU, or BRAID_REPACK=off)"
		}
		return "weights in the file's layout (none of " + strings.Join(kinds, ", ") + ")"
	}
	return fmt.Sprintf("%d matrices (%d MiB) repacked at load in %.2fs on %d threads (%.2fs after the binding); this CPU's kernels take %s",
		s.Matrices, s.Bytes>>20, s.Took.Seconds(), runtime.NumCPU(), s.Wait.Seconds(), strings.Join(kinds, ", "))
}
