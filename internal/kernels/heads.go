package kernels

import (
	"fmt"
	"unsafe"
)

// headsJob is one MatVecHeads call as the workers see it.
type headsJob struct {
	impl    *dotImpl
	ws      []Matrix
	ldw     int // bytes per weight row (the same for every head)
	x       []float32
	ldx     int // floats from one head's vector to the next
	xa      []byte
	rb      int                             // bytes from one head's converted vector to the next (0: one shared)
	xlen    int                             // bytes of a converted vector
	conv    func(dst []byte, src []float32) // set: each head's first chunk converts its vector
	dst     []float32
	ldd     int       // floats from one head's output to the next
	parts   int       // chunks per head
	rowsPer int       // rows per chunk
	x8      *x8Format // set when the heads are repacked (X8)
}

// MatVecHeads computes one matrix-vector product per head,
//
//	dst[h*ldd : h*ldd+ws[h].Rows] = ws[h] · x[h*ldx : h*ldx+ws[h].Cols]
//
// for every h < len(ws), the matrices all of one type and shape; ldx 0
// gives every head the same vector (converted once). Each
// head's result has the bits MatMul gives that head's product alone with
// one vector; the difference is one parallel job for all the heads instead
// of one per head. Latent attention (MLA) multiplies every head's query
// and output by its own small matrix (DeepSeek-V3: 128 heads of 512x128
// and 128x512 a layer); as separate MatMuls each pays an activation
// conversion, a job start and the workers' wake-up for a few tens of
// kilobytes of weights. The experts a token is routed to are the same case
// with one vector for all of them.
func (p *Pool) MatVecHeads(dst []float32, ldd int, ws []Matrix, x []float32, ldx int) {
	nh := len(ws)
	if nh == 0 || ws[0].Rows == 0 {
		return
	}
	w0 := &ws[0]
	ldw := w0.rowBytes()
	for h := range ws {
		w := &ws[h]
		if w.Type != w0.Type || w.Rows != w0.Rows || w.Cols != w0.Cols || w.Layout != w0.Layout {
			panic(fmt.Sprintf("kernels: MatVecHeads: head %d is %s %dx%d %s, head 0 %s %dx%d %s", h, w.Type, w.Rows, w.Cols, w.Layout, w0.Type, w0.Rows, w0.Cols, w0.Layout))
		}
		w.rowBytes() // checks the head's data length
	}
	if ldx != 0 && ldx < w0.Cols || ldd < w0.Rows || len(x) < (nh-1)*ldx+w0.Cols || len(dst) < (nh-1)*ldd+w0.Rows {
		panic(fmt.Sprintf("kernels: MatVecHeads of %d heads %dx%d: x has %d values at stride %d, dst %d at stride %d", nh, w0.Rows, w0.Cols, len(x), ldx, len(dst), ldd))
	}
	impl := implFor(w0.Type)
	if impl == nil {
		panic("kernels: no dot product for weight type " + w0.Type.String())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	j := &p.job.heads
	*j = headsJob{impl: impl, ws: ws, ldw: ldw, x: x, ldx: ldx, dst: dst, ldd: ldd, parts: 1, rowsPer: w0.Rows}
	if w0.Layout == X8 {
		j.x8 = x8For(w0.Type, impl.name == "generic")
		if j.x8 == nil || j.x8.act != impl.act {
			panic("kernels: " + w0.Type.String() + " heads in the x8 layout without x8 kernels")
		}
	}
	// Enough chunks for every thread, each head's rows in as few as
	// that allows (whole groups of a repacked matrix).
	if want := 2 * p.threads; nh < want {
		j.parts = (want + nh - 1) / nh
		j.rowsPer = (w0.Rows + j.parts - 1) / j.parts
		if j.x8 != nil {
			j.rowsPer = (j.rowsPer + 7) &^ 7
		}
		j.parts = (w0.Rows + j.rowsPer - 1) / j.rowsPer
	}
	// The activations as MatMul's one-vector product takes them.
	if conv, rb := impl.vecConv(w0.Cols); conv != nil {
		j.rb, j.xlen = rb, rb
		vecs := nh
		if ldx == 0 {
			vecs, j.rb = 1, 0
		}
		if need := rb * vecs; len(p.scratch) < need {
			p.scratch = make([]byte, need+need/4)
		}
		j.xa = p.scratch[:rb*vecs]
		if j.parts == 1 && vecs > 1 {
			j.conv = conv
		} else {
			// One vector for all, or few heads with several chunks
			// each: convert them all first.
			for h := 0; h < vecs; h++ {
				conv(j.xa[h*rb:(h+1)*rb], x[h*ldx:h*ldx+w0.Cols])
			}
		}
	}
	p.job.chunks = nh * j.parts
	p.job.run = runHeads
	p.start()
	*j = headsJob{}
}

func runHeads(p *Pool, c int) {
	j := &p.job.heads
	h, part := c/j.parts, c%j.parts
	w := &j.ws[h]
	cols := w.Cols
	var xa []byte
	if j.xa == nil {
		xa = unsafe.Slice((*byte)(unsafe.Pointer(&j.x[h*j.ldx])), 4*cols)
	} else {
		xa = j.xa[h*j.rb : h*j.rb+j.xlen]
		if j.conv != nil {
			j.conv(xa, j.x[h*j.ldx:h*j.ldx+cols])
		}
	}
	r0 := part * j.rowsPer
	r1 := min(r0+j.rowsPer, w.Rows)
	d := j.dst[h*j.ldd : h*j.ldd+w.Rows]
	if j.x8 != nil {
		j.x8.rows(w.Data, w.Rows, j.ldw, cols, xa, j.xlen, 1, d, 0, r0, r1)
		return
	}
	j.impl.vecRows(cols, w.Data, j.ldw, xa, d, r0, r1)
}
