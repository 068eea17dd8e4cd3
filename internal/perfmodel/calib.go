package perfmodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"braid/internal/kernels"
	"braid/internal/quant"
	"braid/internal/sysinfo"
)

// Calibration is this node's measured rates, as `braid plan --calibrate`
// caches them.
type Calibration struct {
	Version  int       `json:"version"`
	Build    string    `json:"build"`    // sysinfo build digest: other kernels, other rates
	Features []string  `json:"features"` // kernels.Features: another CPU, other rates
	Threads  int       `json:"threads"`
	Measured time.Time `json:"measured"`
	// MemBW is the read bandwidth of Threads goroutines over a buffer far
	// larger than the caches, bytes/s.
	MemBW float64 `json:"mem_bw"`
	// Stream is each format's decode product (one activation vector) in
	// weight bytes/s, and Flops its batched product (batchCols columns) in
	// flops/s, at 1..Threads threads (index t-1).
	Stream map[string][]float64 `json:"stream"`
	Flops  map[string][]float64 `json:"flops"`
	// FLOPS is Q4_K's batched rate at Threads: the yardstick FlopRate
	// scales other nodes' formats by.
	FLOPS float64 `json:"flops_ref"`
	// Op is the time of a product too small to take any (a 256 x 256
	// Q8_0 matrix-vector product) at 1..Threads threads: the fixed cost
	// of an operation, seconds.
	Op []float64 `json:"op"`
	// Link is the netbench figure of the links, when one was given.
	Link *Link `json:"link,omitempty"`
	// Load is the load average when measured (the machine may be shared).
	Load string `json:"load,omitempty"`
}

// calVersion 4: matrices in the layout a load gives them (repacked).
const calVersion = 4

// batchCols is the columns of the batched product: a prefill chunk's
// size class, where the kernels' tiled paths run.
const batchCols = 256

// CalFormats are the weight formats calibrated: those of braid's presets
// and of the published models (Q2_K for GLM-5.2 Q2, MXFP4 for gpt-oss).
var CalFormats = []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.Q2_K, quant.Q5_K, quant.MXFP4, quant.F16, quant.F32}

func (c *Calibration) stream(t string) (float64, bool) {
	r := c.Stream[t]
	if len(r) == 0 {
		return 0, false
	}
	return r[len(r)-1], true
}

func (c *Calibration) flops(t string) (float64, bool) {
	r := c.Flops[t]
	if len(r) == 0 {
		return 0, false
	}
	return r[len(r)-1], true
}

// DecodeEff is Q4_K's decode rate over the read bandwidth.
func (c *Calibration) DecodeEff() float64 {
	r, ok := c.stream("Q4_K")
	if !ok || c.MemBW <= 0 {
		return 0
	}
	return r / c.MemBW
}

// Node is this node as calibrated, with mem bytes for the model, for
// ranks of threads threads each.
func (c *Calibration) Node(mem int64, threads int) Node {
	n := Node{Name: "local", Mem: mem, BW: c.MemBW, DecodeEff: c.DecodeEff(), FLOPS: c.FLOPS, Cal: c, Host: "local", Threads: threads,
		Link:   Link{BW: 2e9, Lat: 30 * time.Microsecond},
		Source: fmt.Sprintf("calibrated %s, %d threads", c.Measured.Format(time.RFC3339), c.Threads)}
	if c.Link != nil {
		n.Link = *c.Link
		n.Source += ", link from netbench"
	}
	return n
}

// Stale says why a cached calibration does not describe this binary on
// this CPU ("" when it does).
func (c *Calibration) Stale(build string, threads int) string {
	switch {
	case c.Version != calVersion:
		return fmt.Sprintf("version %d, want %d", c.Version, calVersion)
	case c.Build != build:
		return fmt.Sprintf("made by build %q, this is %q", c.Build, build)
	case !slices.Equal(c.Features, kernels.Features()):
		return fmt.Sprintf("CPU features %v, this CPU has %v", c.Features, kernels.Features())
	case c.Threads < threads:
		return fmt.Sprintf("measured up to %d threads, %d asked", c.Threads, threads)
	case c.MemBW <= 0 || c.FLOPS <= 0 || len(c.Stream) == 0 || len(c.Op) < c.Threads:
		return "incomplete"
	}
	return ""
}

// CachePath is where the calibration is kept: the user's cache directory.
func CachePath() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("perfmodel: no cache directory: %w", err)
	}
	return filepath.Join(d, "braid", "plan-calibration.json"), nil
}

// Load reads a cached calibration; it is refused (with the reason) when
// Stale says so.
func Load(path, build string, threads int) (*Calibration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Calibration
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("perfmodel: %s: %w", path, err)
	}
	if why := c.Stale(build, threads); why != "" {
		return nil, &StaleError{Path: path, Why: why}
	}
	return &c, nil
}

// StaleError is a cached calibration that no longer applies.
type StaleError struct{ Path, Why string }

func (e *StaleError) Error() string {
	return fmt.Sprintf("perfmodel: calibration %s is stale: %s (run braid plan --calibrate)", e.Path, e.Why)
}

// Save writes c to path (creating its directory), atomically.
func (c *Calibration) Save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Calibrate measures this node: the read bandwidth and, per format of
// formats, the decode and batched products at 1..threads threads, each
// over about per of wall time (the median of its passes). Matrices are
// mib MiB (at least 4x a last-level cache) so that decode streams from
// memory as a real step does.
func Calibrate(threads int, formats []quant.Type, mib int, per time.Duration) (*Calibration, error) {
	if threads < 1 || mib < 1 || per <= 0 {
		return nil, fmt.Errorf("perfmodel: calibrate: threads %d, %d MiB, %s", threads, mib, per)
	}
	c := &Calibration{Version: calVersion, Build: sysinfo.ReadBuild().Digest(), Features: kernels.Features(), Threads: threads,
		Measured: time.Now().UTC(), Stream: map[string][]float64{}, Flops: map[string][]float64{}}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		c.Load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	c.MemBW = memRead(threads, mib<<20, per)
	rng := rand.New(rand.NewPCG(7, 27))
	tiny, err := matrixOf(rng, quant.Q8_0, 256, 256)
	if err != nil {
		return nil, err
	}
	for th := 1; th <= threads; th++ {
		p := kernels.NewPool(th)
		x, dst := make([]float32, 256), make([]float32, 256)
		c.Op = append(c.Op, median(per/4, func() {
			for range 100 {
				p.MatMul(dst, tiny, x, 1)
			}
		})/100)
		p.Close()
	}
	for _, t := range formats {
		big, err := matrix(rng, t, mib<<20)
		if err != nil {
			return nil, err
		}
		small, err := matrix(rng, t, 4<<20)
		if err != nil {
			return nil, err
		}
		for th := 1; th <= threads; th++ {
			p := kernels.NewPool(th)
			x := make([]float32, big.Cols*batchCols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			dst := make([]float32, max(big.Rows, small.Rows*batchCols))
			sec := median(per, func() { p.MatMul(dst[:big.Rows], big, x[:big.Cols], 1) })
			c.Stream[t.String()] = append(c.Stream[t.String()], float64(len(big.Data))/sec)
			sec = median(per, func() { p.MatMul(dst[:small.Rows*batchCols], small, x, batchCols) })
			c.Flops[t.String()] = append(c.Flops[t.String()], 2*float64(small.Rows)*float64(small.Cols)*batchCols/sec)
			p.Close()
		}
	}
	// A scan with no arithmetic should read fastest, but a kernel with
	// wider loads or better prefetching can beat bytes.IndexByte: the
	// bandwidth is at least what any format streamed.
	for _, r := range c.Stream {
		c.MemBW = max(c.MemBW, r[len(r)-1])
	}
	if r, ok := c.flops("Q4_K"); ok {
		c.FLOPS = r
	} else {
		for _, r := range c.Flops {
			c.FLOPS = max(c.FLOPS, r[len(r)-1])
		}
	}
	if c.MemBW <= 0 || c.FLOPS <= 0 {
		return nil, errors.New("perfmodel: calibrate: a rate came out zero")
	}
	return c, nil
}

// matrix is about size bytes of format t, 4096 values a row, every row a
// quantized random row (the values do not change the kernels' speed).
func matrix(rng *rand.Rand, t quant.Type, size int) (*kernels.Matrix, error) {
	const cols = 4096
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	return matrixOf(rng, t, max(64, size/int(rb)/64*64), cols)
}

// matrixOf is a rows x cols matrix of format t, every row one quantized
// random row.
func matrixOf(rng *rand.Rand, t quant.Type, rows, cols int) (*kernels.Matrix, error) {
	rb, err := t.RowBytes(int64(cols))
	if err != nil {
		return nil, err
	}
	row := make([]byte, rb)
	vals := make([]float32, cols)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64())
	}
	if quant.CanQuantize(t) {
		if err := quant.Quantize(t, vals, row); err != nil {
			return nil, fmt.Errorf("perfmodel: calibrate %s: %w", t, err)
		}
	} else {
		// No quantizer (Q2_K): random bytes time the same kernel.
		for i := range row {
			row[i] = byte(rng.Uint32())
		}
	}
	m := &kernels.Matrix{Type: t, Rows: rows, Cols: cols, Data: make([]byte, rows*int(rb))}
	for r := 0; r < rows; r++ {
		copy(m.Data[r*int(rb):], row)
	}
	// In the layout a load gives it: the kernels of a repacked type are
	// other kernels.
	if p, ok := kernels.Repack(*m, kernels.LayoutFor(t)); ok {
		m = &p
	}
	return m, nil
}

// median runs f once (warm-up, page faults) and then repeatedly for about
// per, and returns the median seconds of a run: on a shared machine the
// median drops the passes another process took the core in.
func median(per time.Duration, f func()) float64 {
	f()
	var ts []float64
	start := time.Now()
	for len(ts) < 3 || (time.Since(start) < per && len(ts) < 1000) {
		t0 := time.Now()
		f()
		ts = append(ts, time.Since(t0).Seconds())
	}
	sort.Float64s(ts)
	return ts[len(ts)/2]
}

// memRead is the read bandwidth of threads goroutines, each scanning its
// part of a size-byte buffer with bytes.IndexByte (vector loads, no
// stores), the median pass.
func memRead(threads, size int, per time.Duration) float64 {
	buf := bytes.Repeat([]byte{0x5a}, size)
	part := size / threads
	found := make([]int, threads)
	sec := median(per, func() {
		var wg sync.WaitGroup
		for i := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The result is kept so that the scan is not elided.
				found[i] = bytes.IndexByte(buf[i*part:(i+1)*part], 1)
			}()
		}
		wg.Wait()
	})
	return float64(part*threads) / sec
}
