package modelgen

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"braid/internal/gguf"
	"braid/internal/quant"
)

// File is a model laid out but not yet generated: its metadata, the name,
// type and place of every tensor, and so its size. Writing it draws the
// values, a piece at a time, so that a model of 12 GB never needs 12 GB of
// memory.
type File struct {
	cfg     Config
	meta    *gguf.Writer // the metadata keys, no tensors
	tensors []tensorSpec
	header  []byte // all bytes before the data section, padded
	size    int64
}

// Plan lays out the model c without generating it.
func Plan(c Config) (*File, error) {
	if err := c.fill(); err != nil {
		return nil, err
	}
	tensors, err := c.plan()
	if err != nil {
		return nil, err
	}
	f := &File{cfg: c, meta: gguf.NewWriter(), tensors: tensors}
	c.setMetadata(f.meta)
	if err := f.layout(); err != nil {
		return nil, err
	}
	return f, nil
}

// Size is the size of the file in bytes.
func (f *File) Size() int64 { return f.size }

// metadata is the Writer holding the file's metadata, for Build to add
// the tensors to.
func (f *File) metadata() *gguf.Writer { return f.meta }

// values returns the random source the tensors draw from, in file order.
// It is the stream modelgen drew from before it wrote while generating, so
// a Config still writes the same bytes and cached files stay valid.
func (f *File) values() *drawer {
	return &drawer{rand.New(rand.NewPCG(f.cfg.Seed, 0x6272616964))}
}

type drawer struct{ rng *rand.Rand }

// fill draws the next len(vals) values of tensor t.
func (d *drawer) fill(t *tensorSpec, vals []float32) {
	if t.negExp {
		for i := range vals {
			vals[i] = float32(-math.Exp(t.mean + t.std*d.rng.NormFloat64()))
		}
		return
	}
	if t.mean == 0 {
		for i := range vals {
			vals[i] = float32(d.rng.NormFloat64() * t.std)
		}
		return
	}
	for i := range vals {
		vals[i] = float32(t.mean + t.std*d.rng.NormFloat64())
	}
}

// layout encodes the header: gguf.Writer encodes the metadata (it is
// given no tensors, whose data it would want in memory), and the tensor
// directory, a fixed record per tensor, is appended here with each
// tensor's offset, aligned as gguf.Writer aligns them.
func (f *File) layout() error {
	var buf bytes.Buffer
	if _, err := f.meta.WriteTo(&buf); err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	h := buf.Bytes()
	le := binary.LittleEndian
	// "GGUF", version, tensor count, key count: the count must be the 0 of
	// a Writer without tensors, or the encoding is not the one assumed.
	if len(h) < 24 || string(h[:4]) != "GGUF" || le.Uint64(h[8:]) != 0 {
		return fmt.Errorf("modelgen: unexpected GGUF header from gguf.Writer (% x)", h[:min(len(h), 24)])
	}
	le.PutUint64(h[8:], uint64(len(f.tensors)))
	const align = gguf.DefaultAlignment
	off := int64(0)
	for i := range f.tensors {
		t := &f.tensors[i]
		t.offset = off
		h = le.AppendUint64(h, uint64(len(t.name)))
		h = append(h, t.name...)
		h = le.AppendUint32(h, uint32(len(t.shape)))
		for _, d := range t.shape {
			h = le.AppendUint64(h, uint64(d))
		}
		h = le.AppendUint32(h, uint32(t.typ))
		h = le.AppendUint64(h, uint64(off))
		off = alignUp(off+t.size, align)
	}
	h = append(h, make([]byte, alignUp(int64(len(h)), align)-int64(len(h)))...)
	f.header = h
	f.size = int64(len(h)) + off
	return nil
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// pieceValues is how many values are drawn and quantized as one piece: a
// whole number of blocks of every type (their block sizes divide it), big
// enough that handing pieces between goroutines costs nothing measurable,
// small enough that the pieces in flight take a few MB.
const pieceValues = 1 << 18

// piece is a run of one tensor's values on its way to the file.
type piece struct {
	t    *tensorSpec
	vals []float32
	data []byte
	last bool // the tensor's last piece: alignment padding follows it
	err  error
	done chan struct{} // closed once data holds vals quantized
}

// WriteTo generates the model and writes it to out. The values are drawn
// in order by one goroutine (the random stream is sequential), quantized by
// the others, and written in order.
func (f *File) WriteTo(out io.Writer) (int64, error) {
	n, err := f.write(out, nil)
	if err != nil {
		err = fmt.Errorf("modelgen: %w", err)
	}
	return n, err
}

func (f *File) write(out io.Writer, progress func(done, total int64)) (int64, error) {
	if f.cfg.ShapeOnly {
		return 0, errors.New("a ShapeOnly layout has no data to write (WriteShape)")
	}
	workers := max(1, runtime.GOMAXPROCS(0)-1)
	// Every piece in flight comes from free, so the channels below, as
	// large as free, never block a sender.
	free := make(chan *piece, 2*workers+2)
	for range cap(free) {
		free <- &piece{vals: make([]float32, pieceValues)}
	}
	jobs := make(chan *piece, cap(free))
	inOrder := make(chan *piece, cap(free))
	stop := make(chan struct{})

	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				if err := quant.Quantize(p.t.typ, p.vals, p.data); err != nil {
					p.err = fmt.Errorf("%s: %w", p.t.name, err)
				}
				close(p.done)
			}
		}()
	}
	go func() {
		defer close(inOrder)
		defer close(jobs)
		d := f.values()
		for i := range f.tensors {
			t := &f.tensors[i]
			for off := int64(0); off < t.values; off += pieceValues {
				var p *piece
				select {
				case p = <-free:
				case <-stop:
					return
				}
				n := min(pieceValues, t.values-off)
				p.t, p.vals, p.last, p.err = t, p.vals[:n], off+n == t.values, nil
				size, _ := t.typ.RowBytes(n)
				if int64(cap(p.data)) < size {
					p.data = make([]byte, size)
				}
				p.data = p.data[:size]
				p.done = make(chan struct{})
				d.fill(t, p.vals)
				jobs <- p
				inOrder <- p
			}
		}
	}()

	w := &countWriter{w: bufio.NewWriterSize(out, 1<<20)}
	w.write(f.header)
	var err error
	for p := range inOrder {
		<-p.done
		if err == nil {
			if err = p.err; err == nil {
				w.write(p.data)
				if p.last {
					w.pad(alignUp(w.n, gguf.DefaultAlignment))
				}
				if err = w.err; err == nil && progress != nil {
					progress(w.n, f.size)
				}
			}
			if err != nil {
				close(stop)
			}
		}
		free <- p
	}
	wg.Wait()
	if err == nil {
		err = w.w.Flush()
	}
	if err == nil && w.n != f.size {
		err = fmt.Errorf("wrote %d bytes, the layout says %d", w.n, f.size)
	}
	return w.n, err
}

// countWriter counts the bytes passed on and keeps the first error.
type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

var zeros [gguf.DefaultAlignment]byte

func (c *countWriter) pad(to int64) { c.write(zeros[:to-c.n]) }

// WriteFile writes the model to path: to a temporary file in the same
// directory, synced, then renamed, so that a reader never sees half a
// model under the final name. progress, if not nil, is called as the data
// is written (every 2^18 values) with the bytes written so far and the
// total; the sync that follows the last call can take a while.
func (f *File) WriteFile(path string, progress func(done, total int64)) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = f.write(tmp, progress); err != nil {
		return fmt.Errorf("modelgen: writing %s: %w", path, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("modelgen: writing %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("modelgen: writing %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	return nil
}

// WriteShape writes only the model's header (metadata and tensor
// directory) to path and extends the file to its full size without
// writing the data: a sparse file that reads as zeros. It lets a model too
// large to generate (a 744B shape) be opened, configured and planned
// (braid plan's performance model) as if it were on disk; its weights are
// not weights and must never be run.
func (f *File) WriteShape(path string) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	_, err = out.Write(f.header)
	if err == nil {
		err = out.Truncate(f.size)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("modelgen: %s: %w", path, err)
	}
	return nil
}
