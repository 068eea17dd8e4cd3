package kernels

import (
	"fmt"
	"unsafe"

	"braid/internal/quant"
)

// Matrix is a weight matrix in one of the GGUF block formats: Rows rows of
// Cols values each, row-major, each row Type.RowBytes(Cols) bytes long. Data
// usually points into a memory-mapped model file.
type Matrix struct {
	Type       quant.Type
	Rows, Cols int
	Data       []byte
	// Layout is Data's arrangement: Plain as in the file, or repacked
	// for this CPU's kernels at load (Repack).
	Layout Layout
}

// rowBytes returns the byte length of one row, panicking on a malformed
// matrix: a shape error here is a loader bug, never a runtime condition.
func (m *Matrix) rowBytes() int {
	rb, err := m.Type.RowBytes(int64(m.Cols))
	if err != nil {
		panic("kernels: " + err.Error())
	}
	if len(m.Data) < int(rb)*m.Rows {
		panic(fmt.Sprintf("kernels: %s matrix %dx%d needs %d bytes, has %d", m.Type, m.Rows, m.Cols, int(rb)*m.Rows, len(m.Data)))
	}
	return int(rb)
}

// matJob is one MatMul call as the workers see it.
type matJob struct {
	impl    *dotImpl
	mm      func(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int)
	w       []byte
	ldw     int // bytes per weight row
	rows    int
	cols    int // values per row
	x       []byte
	ldx     int // bytes per converted activation vector
	n       int // activation vectors
	dst     []float32
	rowStep int // rows per chunk
	tr, tc  int // the most rows and columns mm takes

	// activation conversion
	src   []float32
	conv  func(dst []byte, src []float32)
	colsC int // vectors per conversion chunk

	// x8 is set for a repacked (X8) matrix: with x8dot its kernels
	// compute every vector (decode, exact verification), else each chunk
	// of rows is unpacked to plain rows for the tiles.
	x8    *x8Format
	x8dot bool
}

// MatMul computes dst[j*w.Rows+i] = dot(row i of w, x[j*w.Cols:(j+1)*w.Cols])
// for the n activation vectors in x: n == 1 is the matrix-vector product of
// decode, n > 1 the matrix-matrix product of prefill. The activations are
// first converted to the kernel's activation format (Q8_0 for Q4_0, as
// llama.cpp does), then rows are split over the pool's threads.
//
// MatMul does not allocate once the pool's scratch has grown to the largest
// call, and it starts no goroutines.
func (p *Pool) MatMul(dst []float32, w *Matrix, x []float32, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.actKey = actKey{}
	p.matMul(dst, w, x, n)
	p.actKey, p.actX = actKey{}, nil
}

// MatOut is one product of MatMulShared: Dst = W·x.
type MatOut struct {
	Dst []float32
	W   *Matrix
}

// MatMulShared computes several products of the same activations, as
// MatMul does each (results are identical), converting the activations
// once for all the weights that take the same activation format: the Q, K
// and V projections of a layer, or its gate and up. For batched decode the
// conversion is a visible share of the step.
func (p *Pool) MatMulShared(x []float32, n int, outs ...MatOut) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.actKey = actKey{}
	for _, o := range outs {
		p.matMul(o.Dst, o.W, x, n)
	}
	p.actKey, p.actX = actKey{}, nil
}

// actKey names the activations in the pool's scratch: which vectors, in
// which format. The zero key matches nothing.
type actKey struct {
	x       *float32
	n, cols int
	act     quant.Type
	wide    string // dotImpl.wideKind when converted by wideAct
}

func (p *Pool) matMul(dst []float32, w *Matrix, x []float32, n int) {
	p.matMulWith(implFor(w.Type), dst, w, x, n)
}

// matMulWith is matMul on kernel impl (tests run every candidate).
func (p *Pool) matMulWith(impl *dotImpl, dst []float32, w *Matrix, x []float32, n int) {
	if n <= 0 || w.Rows == 0 {
		return
	}
	ldw := w.rowBytes()
	if len(x) < n*w.Cols || len(dst) < n*w.Rows {
		panic(fmt.Sprintf("kernels: MatMul %dx%d by %d vectors: x has %d values, dst %d", w.Rows, w.Cols, n, len(x), len(dst)))
	}
	if impl == nil {
		panic("kernels: no dot product for weight type " + w.Type.String())
	}

	j := &p.job.mm
	*j = matJob{impl: impl, w: w.Data, ldw: ldw, rows: w.Rows, cols: w.Cols, n: n, dst: dst}
	// Tiles unless SetExactColumns asks for the one-vector arithmetic and
	// the tiles round differently from it; then the row dot's own tile
	// (mmDot), or the row dot once per vector.
	tiles := n > 1 && (n > p.exactCols || impl.exactTiles)
	if w.Layout == X8 {
		// A repacked matrix has one arithmetic for every vector count
		// (x8Format's dot8); only products too large to be exact take
		// the tiles, on rows unpacked chunk by chunk.
		j.x8 = x8For(w.Type, impl.name == "generic")
		if j.x8 == nil || j.x8.act != impl.act {
			panic("kernels: " + w.Type.String() + " matrix in the x8 layout without x8 kernels")
		}
		// Where this CPU has no tiles for the type (the K-quants with
		// AVX2), the x8 kernel beats the row dot once per vector at any
		// count.
		tiles = n > 1 && n > p.exactCols && !j.x8.noTiles && (impl.mm != nil || impl.mmWide != nil)
		j.x8dot = !tiles
	}
	switch {
	case j.x8dot:
	case tiles:
		j.mm, j.tr, j.tc = impl.mm, impl.mmRows, impl.mmCols
	case n > 1 && impl.mmDot != nil:
		j.mm, j.tr, j.tc = impl.mmDot, 64, impl.mmDotCols
	}
	key := actKey{x: &x[0], n: n, cols: w.Cols, act: impl.act}
	switch {
	case tiles && impl.mmWide != nil:
		j.mm, j.tr, j.tc = impl.mmWide, impl.mmRows, impl.mmCols
		key.wide = impl.wideKind
		if key == p.actKey && key.wide != "" {
			j.x, j.ldx = p.actX, p.actLdx
		} else {
			p.convertWith(impl.wideAct, 4*w.Cols, x, n, w.Cols)
		}
	case impl.act == quant.F32:
		j.x = unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*n*w.Cols)
		j.ldx = 4 * w.Cols
	default:
		if key == p.actKey {
			j.x, j.ldx = p.actX, p.actLdx
		} else {
			p.convert(impl.act, x, n, w.Cols)
		}
	}
	// Activations already converted by the previous product of a
	// MatMulShared stay in the scratch: actKey names them.
	p.actKey, p.actX, p.actLdx = key, j.x, j.ldx

	// Chunks of rows: enough of them for dynamic balancing, but big enough
	// that a chunk's weights are worth a wake-up, and (for prefill) a whole
	// number of tile heights so each chunk's weights stay in L2 while every
	// activation vector streams past them.
	step := max(16, w.Rows/(8*p.threads))
	if n > 1 && !j.x8dot {
		step = 64
		if j.mm != nil {
			step = max(j.tr, step/j.tr*j.tr)
		}
	}
	if j.x8 != nil {
		step = (step + 7) &^ 7 // whole groups
	}
	j.rowStep = step
	p.job.chunks = (w.Rows + step - 1) / step
	p.job.run = runMatMul
	p.start()
	j.w, j.x, j.dst, j.src, j.mm, j.x8 = nil, nil, nil, nil, nil, nil
}

// convert quantizes the n activation vectors into the pool's scratch.
func (p *Pool) convert(act quant.Type, x []float32, n, cols int) {
	rb, err := act.RowBytes(int64(cols))
	if err != nil {
		panic("kernels: activations: " + err.Error())
	}
	conv := actQuantizers[act]
	if conv == nil {
		panic("kernels: no activation conversion to " + act.String())
	}
	p.convertWith(conv, int(rb), x, n, cols)
}

// convertWith converts the n activation vectors with conv into the pool's
// scratch, ldx bytes per vector.
func (p *Pool) convertWith(conv func(dst []byte, src []float32), ldx int, x []float32, n, cols int) {
	if need := ldx * n; len(p.scratch) < need {
		p.scratch = make([]byte, need+need/4)
	}
	j := &p.job.mm
	j.x, j.ldx, j.src, j.conv = p.scratch[:ldx*n], ldx, x, conv
	if n*cols < 1<<16 || p.threads == 1 {
		for c := 0; c < n; c++ {
			conv(j.x[c*ldx:(c+1)*ldx], x[c*cols:(c+1)*cols])
		}
		return
	}
	j.colsC = max(1, n/(4*p.threads))
	p.job.chunks = (n + j.colsC - 1) / j.colsC
	p.job.run = runConvert
	p.start()
}

func runConvert(p *Pool, c int) {
	j := &p.job.mm
	for v := c * j.colsC; v < min((c+1)*j.colsC, j.n); v++ {
		j.conv(j.x[v*j.ldx:(v+1)*j.ldx], j.src[v*j.cols:(v+1)*j.cols])
	}
}

func runMatMul(p *Pool, c int) {
	j := &p.job.mm
	r0 := c * j.rowStep
	r1 := min(r0+j.rowStep, j.rows)
	dot, cols, ldw, ldx := j.impl.dot, j.cols, j.ldw, j.ldx
	if j.x8dot {
		runX8(j, r0, r1)
		return
	}
	if j.n == 1 {
		j.impl.vecRows(cols, j.w, ldw, j.x[:ldx], j.dst, r0, r1)
		return
	}
	// A repacked matrix's chunk is unpacked for the tiles (or the row
	// dot per vector where there are none): w holds rows [base, r1).
	w, base := j.w, 0
	if j.x8 != nil {
		buf := p.x8Take((r1 - r0) * ldw)
		defer p.x8Put(buf)
		j.x8.unpackRows(buf, j.w, j.rows, ldw, r0, r1)
		w, base = buf, r0
	}
	if mm := j.mm; mm != nil {
		tr, tc := j.tr, j.tc
		for v := 0; v < j.n; v += tc {
			nc := min(tc, j.n-v)
			for r := r0; r < r1; r += tr {
				nr := min(tr, r1-r)
				mm(cols, w[(r-base)*ldw:], ldw, j.x[v*ldx:], ldx, j.dst[v*j.rows+r:], j.rows, nr, nc)
			}
		}
		return
	}
	for v := 0; v < j.n; v++ {
		x := j.x[v*ldx : (v+1)*ldx]
		d := j.dst[v*j.rows:]
		for r := r0; r < r1; r++ {
			d[r] = dot(cols, w[(r-base)*ldw:(r-base+1)*ldw], x)
		}
	}
}

// mmByDot is the tile function for kernels without a register-blocked one,
// and for the partial tiles at the edges of those that have one.
func mmByDot(dot func(n int, w, x []byte) float32, n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int) {
	for c := 0; c < cols; c++ {
		xc := x[c*ldx : c*ldx+ldx]
		for r := 0; r < rows; r++ {
			dst[c*ldd+r] = dot(n, w[r*ldw:r*ldw+ldw], xc)
		}
	}
}

// vecConv says how impl's one-vector product takes a vector of cols
// values: converted by conv into ldx bytes, or (conv nil) as the float32
// values themselves. With vecRows it is the one-vector product of MatMul,
// for the kernels that compute it elsewhere (MatVecHeads), so that their
// results keep MatMul's bits.
func (d *dotImpl) vecConv(cols int) (conv func(dst []byte, src []float32), ldx int) {
	if d.act == quant.F32 {
		return nil, 4 * cols
	}
	rb, err := d.act.RowBytes(int64(cols))
	if err != nil {
		panic("kernels: activations: " + err.Error())
	}
	conv = actQuantizers[d.act]
	if conv == nil {
		panic("kernels: no activation conversion to " + d.act.String())
	}
	return conv, int(rb)
}

// vecRows computes rows r0..r1-1 of the product of w (ldw bytes a row) and
// one vector x of cols values converted as vecConv says, into dst[r0:r1],
// by the row dot (its rows form where there is one: the same bits).
func (d *dotImpl) vecRows(cols int, w []byte, ldw int, x []byte, dst []float32, r0, r1 int) {
	if d.rows != nil {
		d.rows(cols, w[r0*ldw:], ldw, x, dst[r0:r1])
		return
	}
	for r := r0; r < r1; r++ {
		dst[r] = d.dot(cols, w[r*ldw:(r+1)*ldw], x)
	}
}
