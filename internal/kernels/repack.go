package kernels

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"

	"braid/internal/quant"
)

// Layout is how a Matrix's Data is arranged.
type Layout uint8

const (
	// Plain is the GGUF layout: rows one after another, each the format's
	// blocks in order.
	Plain Layout = iota
	// X8 interleaves groups of eight rows block by block for kernels
	// whose vector lanes are rows (see x8Format): the scales of eight rows
	// are unpacked by one instruction and every activation byte loaded
	// once serves eight rows. A group takes the bytes its eight plain rows
	// took, so row ranges that are multiples of eight keep their offsets;
	// the rows after the last full group stay plain.
	X8
)

func (l Layout) String() string {
	switch l {
	case Plain:
		return "plain"
	case X8:
		return "x8"
	}
	return fmt.Sprintf("layout(%d)", uint8(l))
}

// LayoutVersion numbers the byte arrangement of every repacked layout:
// `braid split` writes it into shard files that hold repacked weights,
// and a loader refuses a file of another version. Any change to a
// format's pack function must increment it.
const LayoutVersion = 1

// Versioned is l's name with the version of its byte arrangement, as
// shard files record it: "x8.v1" ("plain" has no version).
func (l Layout) Versioned() string {
	if l == Plain {
		return "plain"
	}
	return fmt.Sprintf("%s.v%d", l, LayoutVersion)
}

// ParseLayout reads a Versioned name.
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "plain":
		return Plain, nil
	case X8.Versioned():
		return X8, nil
	}
	return Plain, fmt.Errorf("layout %q: this build knows plain and %s", s, X8.Versioned())
}

// HasLayout says whether weight type t can be stored in layout l (every
// type can be plain; X8 where a format exists, whatever this CPU's
// kernels are: a file may be written for other nodes).
func HasLayout(t quant.Type, l Layout) bool {
	return l == Plain || (l == X8 && x8Generic[t] != nil)
}

// Packable says whether Repack would repack m into l: the type has the
// layout and m has at least one group of rows.
func Packable(m Matrix, l Layout) bool {
	return l != Plain && m.Layout == Plain && m.Rows >= 8 && HasLayout(m.Type, l)
}

// Prepacked returns m, whose Data already holds its rows in layout l (a
// shard file written repacked), marked as such.
func Prepacked(m Matrix, l Layout) (Matrix, error) {
	if !Packable(m, l) {
		return m, fmt.Errorf("kernels: a %dx%d %s matrix cannot be in layout %s", m.Rows, m.Cols, m.Type, l)
	}
	if len(m.Data) != m.rowBytes()*m.Rows {
		return m, fmt.Errorf("kernels: a %dx%d %s matrix of %d bytes", m.Rows, m.Cols, m.Type, len(m.Data))
	}
	m.Layout = l
	return m, nil
}

// x8Format is one weight type's X8 layout and its kernels.
//
// The arithmetic of dot8 is the format's canonical row arithmetic (ref):
// every row's result is, bit for bit, ref on that row, whatever the group,
// the number of vectors or the threads. That is what lets a repacked
// matrix serve decode, exact verification of several tokens and tensor
// splits cut anywhere with one rounding, and what lets the rows after the
// last group use ref itself.
type x8Format struct {
	name string // kernel name for Selected and doctor, "avx2"
	act  quant.Type
	// noTiles keeps every product on the x8 kernels, even where the CPU
	// has tiles for the type; otherwise a product of more vectors than
	// SetExactColumns's bound takes the tiles, on rows unpacked chunk by
	// chunk.
	noTiles bool
	block   int // bytes of one plain block (256 values for the K-quants, 32 for Q4_0, Q8_0 and MXFP4)
	// pack and unpack convert one group of nb blocks of eight rows:
	// src plain rows (8*nb*block bytes, row after row) to dst, and back.
	pack, unpack func(dst, src []byte, nb int)
	// dot8 multiplies one group (nb blocks) by one converted vector x,
	// writing the eight rows' results to dst[0:8].
	dot8 func(nb int, w, x []byte, dst *[8]float32)
	// dot8x4, when set, is dot8 for four vectors ldx bytes apart (vector
	// c's rows to dst[c*ldd:]), with dot8's bits for each: the codes are
	// unpacked once for the four.
	dot8x4 func(nb int, w, x []byte, ldx int, dst []float32, ldd int)
	// dot8x4a, when set instead, is dot8x4 for a format whose block step
	// needs a quantity of each vector's block beside the codes (Q4_0:
	// 8*sum(x)), which the one-vector kernel finds in line: auxOf writes
	// it, auxBytes a block, for one vector, once per product instead of
	// once per group of rows, and aux holds the four vectors' one after
	// the other.
	dot8x4a  func(nb int, w, x []byte, ldx int, aux []byte, dst []float32, ldd int)
	auxOf    func(nb int, x []byte, aux []byte)
	auxBytes int
	// ref is the row dot with dot8's arithmetic on a plain row.
	ref func(n int, w, x []byte) float32
}

var (
	x8Generic = map[quant.Type]*x8Format{} // pure-Go dot8: the oracle
	x8Fast    = map[quant.Type]*x8Format{} // assembly, registered where this CPU runs it
)

// repackOff is read once: BRAID_REPACK=off keeps every matrix plain, so
// that the layout's effect can be measured against the same binary.
var repackOff = os.Getenv("BRAID_REPACK") == "off"

var (
	repackMu      sync.Mutex
	repackStopped = repackOff
)

// SetRepack turns repacking at load on or off for matrices repacked after
// the call (braid's --repack flag); BRAID_REPACK=off starts it off.
func SetRepack(on bool) {
	repackMu.Lock()
	repackStopped = !on
	repackMu.Unlock()
}

// LayoutFor is the layout this CPU's kernels want for weight type t: X8
// where an assembly kernel on it exists and repacking is on, else Plain
// (the pure-Go references read the plain layout: BRAID_KERNELS=generic
// repacks nothing).
func LayoutFor(t quant.Type) Layout {
	repackMu.Lock()
	off := repackStopped
	repackMu.Unlock()
	if off || forcedGeneric {
		return Plain
	}
	if _, ok := x8Fast[t]; ok {
		return X8
	}
	return Plain
}

// PackedChoice is the layout chosen for one weight type, for doctor and
// the load log.
type PackedChoice struct {
	Type   quant.Type
	Layout Layout
	Impl   string
}

// PackedSelected lists the weight types repacked at load on this CPU.
func PackedSelected() []PackedChoice {
	var out []PackedChoice
	for t, f := range x8Fast {
		if LayoutFor(t) == X8 {
			out = append(out, PackedChoice{Type: t, Layout: X8, Impl: f.name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

func x8For(t quant.Type, generic bool) *x8Format {
	if generic {
		return x8Generic[t]
	}
	if f := x8Fast[t]; f != nil {
		return f
	}
	return x8Generic[t]
}

// Repack returns m in layout l, in new memory (m's Data is left as it
// is: it may be a read-only view of a mapped file, or shared with the
// token embedding). A matrix already in l, or of a type without l, is
// returned as it is; ok says whether it was repacked.
func Repack(m Matrix, l Layout) (out Matrix, ok bool) {
	out, fill, ok := PrepareRepack(m, l)
	if ok {
		fill(0, m.Rows)
	}
	return out, ok
}

// PrepareRepack is Repack in two steps, so that a loader can bind every
// matrix first and fill them on several threads, in pieces: out has its
// new Data (not yet written) and layout, and fill(r0, r1) writes rows
// [r0, r1) of it (r0 a multiple of 8; r1 too, or m.Rows) from the same
// rows of m's Data, which must stay readable until that call returns.
func PrepareRepack(m Matrix, l Layout) (out Matrix, fill func(r0, r1 int), ok bool) {
	if !Packable(m, l) {
		return m, nil, false
	}
	f := x8For(m.Type, false)
	rb := m.rowBytes()
	nb := rb / f.block
	src := m.Data[:rb*m.Rows]
	// A fresh allocation this large comes zeroed from the OS and is not
	// touched until fill writes it: the copy costs memory as it is made.
	data := make([]byte, rb*m.Rows)
	adviseHuge(data)
	full := m.Rows / 8 * 8
	fill = func(r0, r1 int) {
		if r0%8 != 0 || (r1%8 != 0 && r1 != m.Rows) || r0 > r1 || r1 > m.Rows {
			panic(fmt.Sprintf("kernels: repack rows [%d,%d) of %d: not whole groups", r0, r1, m.Rows))
		}
		g := r0
		for ; g+8 <= min(r1, full); g += 8 {
			f.pack(data[g*rb:(g+8)*rb], src[g*rb:(g+8)*rb], nb)
		}
		copy(data[g*rb:r1*rb], src[g*rb:r1*rb])
	}
	m.Data, m.Layout = data, l
	return m, fill, true
}

// Unpack returns m in the plain layout, in new memory; the inverse of
// Repack, byte for byte.
func Unpack(m Matrix) Matrix {
	if m.Layout == Plain {
		return m
	}
	f := x8For(m.Type, false)
	rb := m.rowBytes()
	nb := rb / f.block
	data := make([]byte, rb*m.Rows)
	full := m.Rows / 8 * 8
	for g := 0; g < full; g += 8 {
		f.unpack(data[g*rb:(g+8)*rb], m.Data[g*rb:(g+8)*rb], nb)
	}
	copy(data[full*rb:], m.Data[full*rb:m.Rows*rb])
	m.Data, m.Layout = data, Plain
	return m
}

// unpackRows writes plain rows [r0, r1) (r0 a multiple of 8) of a
// repacked matrix of rows rows, rb bytes a row, into dst.
func (f *x8Format) unpackRows(dst, data []byte, rows, rb, r0, r1 int) {
	nb := rb / f.block
	full := rows / 8 * 8
	r := r0
	for ; r+8 <= r1 && r+8 <= full; r += 8 {
		f.unpack(dst[(r-r0)*rb:(r-r0+8)*rb], data[r*rb:(r+8)*rb], nb)
	}
	copy(dst[(r-r0)*rb:(r1-r0)*rb], data[r*rb:r1*rb])
}

// runX8 computes rows [r0, r1) of a repacked product for every vector
// with the x8 kernel (and its canonical row dot for the rows after the
// last group): the same bits for a row whatever the vectors, chunks or
// threads.
func runX8(j *matJob, r0, r1 int) {
	j.x8.rows(j.w, j.rows, j.ldw, j.cols, j.x, j.ldx, j.n, j.dst, j.rows, r0, r1)
}

// rows is runX8 on a repacked matrix of rows rows (data, ldw bytes a
// row, cols values) and n converted vectors (ldx bytes apart), writing
// vector v's row r to dst[v*ldd+r]; r0 is a multiple of 8.
func (f *x8Format) rows(data []byte, rows, ldw, cols int, x []byte, ldx, n int, dst []float32, ldd, r0, r1 int) {
	nb := ldw / f.block
	full := rows / 8 * 8
	var aux []byte
	var ab int
	if f.dot8x4a != nil && n >= 4 && r1-r0 >= 8 {
		ab = nb * f.auxBytes
		bp := auxScratch.Get().(*[]byte)
		defer auxScratch.Put(bp)
		if cap(*bp) < n/4*4*ab {
			*bp = make([]byte, n/4*4*ab)
		}
		aux = (*bp)[:n/4*4*ab]
		for v := 0; v < n/4*4; v++ {
			f.auxOf(nb, x[v*ldx:], aux[v*ab:(v+1)*ab])
		}
	}
	// Three vectors left after the passes of four (a MoE expert's few
	// tokens, often) run as one more four-vector pass, the last repeated,
	// into scratch: it costs 1.3-2 one-vector passes, not three, and
	// gives each vector the same bits.
	var pad *x8Pad
	if n%4 == 3 && (f.dot8x4 != nil || f.dot8x4a != nil) && r1-r0 >= 8 {
		pad = x8Pads.Get().(*x8Pad)
		defer x8Pads.Put(pad)
		pad.x = append(append(pad.x[:0], x[(n-3)*ldx:n*ldx]...), x[(n-1)*ldx:n*ldx]...)
		if f.dot8x4a != nil {
			ab = nb * f.auxBytes
			pad.aux = slices.Grow(pad.aux[:0], 4*ab)[:4*ab]
			for c := 0; c < 4; c++ {
				f.auxOf(nb, pad.x[c*ldx:], pad.aux[c*ab:(c+1)*ab])
			}
		}
	}
	g := r0
	for ; g+8 <= r1 && g+8 <= full; g += 8 {
		w := data[g*ldw : (g+8)*ldw]
		v := 0
		if aux != nil {
			for ; v+4 <= n; v += 4 {
				f.dot8x4a(nb, w, x[v*ldx:(v+4)*ldx], ldx, aux[v*ab:(v+4)*ab], dst[v*ldd+g:], ldd)
			}
		}
		if f.dot8x4 != nil {
			for ; v+4 <= n; v += 4 {
				f.dot8x4(nb, w, x[v*ldx:(v+4)*ldx], ldx, dst[v*ldd+g:], ldd)
			}
		}
		if pad != nil && v == n-3 {
			if f.dot8x4a != nil {
				f.dot8x4a(nb, w, pad.x, ldx, pad.aux, pad.dst[:], 8)
			} else {
				f.dot8x4(nb, w, pad.x, ldx, pad.dst[:], 8)
			}
			for c := 0; c < 3; c++ {
				copy(dst[(v+c)*ldd+g:(v+c)*ldd+g+8], pad.dst[8*c:8*c+8])
			}
			v = n
		}
		for ; v < n; v++ {
			f.dot8(nb, w, x[v*ldx:(v+1)*ldx], (*[8]float32)(dst[v*ldd+g:]))
		}
	}
	for r := g; r < r1; r++ {
		w := data[r*ldw : (r+1)*ldw]
		for v := 0; v < n; v++ {
			dst[v*ldd+r] = f.ref(cols, w, x[v*ldx:(v+1)*ldx])
		}
	}
}

// x8Pad is the scratch of a padded four-vector pass: the three vectors
// and the last again, their aux, and the four vectors' eight rows.
type x8Pad struct {
	x, aux []byte
	dst    [32]float32
}

var x8Pads = sync.Pool{New: func() any { return new(x8Pad) }}

// auxScratch holds the dot8x4a vectors' aux of a product, one per
// thread at a time.
var auxScratch = sync.Pool{New: func() any { return new([]byte) }}

// x8Take returns a scratch buffer of n bytes for one chunk's unpacked
// rows; at most Threads chunks hold one at a time.
func (p *Pool) x8Take(n int) []byte {
	var b []byte
	select {
	case b = <-p.x8free:
	default:
	}
	if cap(b) < n {
		b = make([]byte, n)
	}
	return b[:n]
}

func (p *Pool) x8Put(b []byte) {
	select {
	case p.x8free <- b:
	default:
	}
}
