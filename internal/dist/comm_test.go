package dist

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"braid/internal/dist/wire"
)

// group builds n connected ranks of the given kind ("inproc" or "tcp").
func group(t testing.TB, kind string, n int, timeout time.Duration) []Transport {
	t.Helper()
	switch kind {
	case "inproc":
		rs, err := NewInProc(n, timeout)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]Transport, n)
		for i, r := range rs {
			out[i] = r
		}
		t.Cleanup(func() {
			for _, r := range out {
				r.Close()
			}
		})
		return out
	case "tcp":
		return tcpGroup(t, n, MeshConfig{Timeout: timeout})
	case "shm":
		return tcpGroup(t, n, MeshConfig{Timeout: timeout, Shm: true})
	}
	t.Fatalf("unknown transport %q", kind)
	return nil
}

// onAll runs f on every rank concurrently and returns the errors by rank.
func onAll(n int, f func(r int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { errs[r] = f(r) })
	}
	wg.Wait()
	return errs
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// inputs returns per-rank vectors of mixed magnitudes, so that the order of
// summation changes the last bits and bit-identity is a real check.
func inputs(n, length int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	xs := make([][]float32, n)
	for r := range xs {
		xs[r] = make([]float32, length)
		for i := range xs[r] {
			xs[r][i] = float32((rng.Float64()*2 - 1) * math.Pow(10, float64(rng.IntN(7)-3)))
		}
	}
	return xs
}

func reference(xs [][]float32) []float64 {
	ref := make([]float64, len(xs[0]))
	for _, x := range xs {
		for i, v := range x {
			ref[i] += float64(v)
		}
	}
	return ref
}

// rankOrder is the one-shot result computed serially: ((x0+x1)+x2)+...
func rankOrder(xs [][]float32) []float32 {
	out := make([]float32, len(xs[0]))
	copy(out, xs[0])
	for _, x := range xs[1:] {
		for i := range out {
			out[i] += x[i]
		}
	}
	return out
}

var testLengths = []int{0, 1, 2, 3, 5, 7, 64, 1001, 4099}

func testAllReduce(t *testing.T, kind string, sizes []int) {
	for _, n := range sizes {
		t.Run(fmt.Sprint("world", n), func(t *testing.T) {
			ts := group(t, kind, n, 10*time.Second)
			comms := make([]*Comm, n)
			for r := range n {
				comms[r] = NewComm(ts[r])
			}
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			lengths := append(append([]int(nil), testLengths...), rng.IntN(20000), 1+rng.IntN(300))
			for _, length := range lengths {
				for _, algo := range []Algo{OneShot, TwoShot, Ring, Auto} {
					xs := inputs(n, length, uint64(length*31+n))
					ref, serial := reference(xs), rankOrder(xs)
					noErrors(t, onAll(n, func(r int) error {
						comms[r].SetStep(uint64(length))
						return comms[r].AllReduce(xs[r], algo)
					}))
					for r := range n {
						for i := range length {
							if math.Float32bits(xs[r][i]) != math.Float32bits(xs[0][i]) {
								t.Fatalf("%s len %d: rank %d [%d] = %v, rank 0 has %v: not bit-identical", algo, length, r, i, xs[r][i], xs[0][i])
							}
						}
					}
					for i := range length {
						got := float64(xs[0][i])
						if d := math.Abs(got - ref[i]); d > 1e-5*(1+math.Abs(ref[i]))*float64(n) {
							t.Fatalf("%s len %d [%d]: got %v, float64 reference %v", algo, length, i, got, ref[i])
						}
						if (algo == OneShot || algo == TwoShot || n <= 2) && math.Float32bits(xs[0][i]) != math.Float32bits(serial[i]) {
							t.Fatalf("%s len %d [%d]: got %v, rank-order sum %v", algo, length, i, xs[0][i], serial[i])
						}
					}
				}
			}
		})
	}
}

func TestAllReduceInProc(t *testing.T) { testAllReduce(t, "inproc", []int{1, 2, 3, 4, 5}) }
func TestAllReduceTCP(t *testing.T)    { testAllReduce(t, "tcp", []int{1, 2, 3, 4, 5}) }

func testHelpers(t *testing.T, kind string) {
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint("world", n), func(t *testing.T) {
			ts := group(t, kind, n, 10*time.Second)
			comms := make([]*Comm, n)
			for r := range n {
				comms[r] = NewComm(ts[r])
			}
			root := n - 1
			got := make([][]byte, n)
			gathered := make([][]string, n)
			noErrors(t, onAll(n, func(r int) error {
				msg := []byte(fmt.Sprintf("step from %d", r))
				b, err := comms[r].Broadcast(root, msg)
				if err != nil {
					return err
				}
				got[r] = append([]byte(nil), b...)
				x := []float32{float32(r), 0, 0}
				if err := comms[r].BroadcastFloat32(0, x); err != nil {
					return err
				}
				if x[0] != 0 {
					return fmt.Errorf("broadcast float32: got %v", x)
				}
				g, err := comms[r].Gather(0, []byte(fmt.Sprint("r", r)))
				if err != nil {
					return err
				}
				for _, b := range g {
					gathered[r] = append(gathered[r], string(b))
				}
				// A pipeline: each rank passes a hidden state to the next.
				h := []float32{float32(r), float32(r * r)}
				if r > 0 {
					if err := comms[r].RecvFloat32(r-1, h); err != nil {
						return err
					}
					if h[0] != float32(r-1) || h[1] != float32((r-1)*(r-1)) {
						return fmt.Errorf("pipeline: rank %d got %v from rank %d", r, h, r-1)
					}
				}
				if r < n-1 {
					return comms[r].SendFloat32(r+1, []float32{float32(r), float32(r * r)})
				}
				return nil
			}))
			for r := range n {
				if want := fmt.Sprintf("step from %d", root); string(got[r]) != want {
					t.Fatalf("broadcast: rank %d got %q, want %q", r, got[r], want)
				}
			}
			want := make([]string, n)
			for r := range n {
				want[r] = fmt.Sprint("r", r)
			}
			if fmt.Sprint(gathered[0]) != fmt.Sprint(want) {
				t.Fatalf("gather on root: got %v, want %v", gathered[0], want)
			}
			for r := 1; r < n; r++ {
				if gathered[r] != nil {
					t.Fatalf("gather: rank %d is not root but got %v", r, gathered[r])
				}
			}
		})
	}
}

func TestHelpersInProc(t *testing.T) { testHelpers(t, "inproc") }
func TestHelpersTCP(t *testing.T)    { testHelpers(t, "tcp") }

// testPeerCloses: rank 2 closes its transport instead of joining the
// all-reduce; the others fail quickly, naming rank 2.
func testPeerCloses(t *testing.T, kind string) {
	const n = 3
	timeout := 5 * time.Second
	ts := group(t, kind, n, timeout)
	comms := make([]*Comm, n)
	for r := range n {
		comms[r] = NewComm(ts[r])
	}
	// One good round first, so the close happens mid-run.
	noErrors(t, onAll(n, func(r int) error { return comms[r].AllReduceSum(make([]float32, 100)) }))
	start := time.Now()
	errs := onAll(n, func(r int) error {
		if r == 2 {
			time.Sleep(50 * time.Millisecond)
			return ts[r].Close()
		}
		return comms[r].AllReduce(make([]float32, 1000), OneShot)
	})
	if el := time.Since(start); el > timeout {
		t.Fatalf("took %v, longer than the %v deadline", el, timeout)
	}
	for r := range 2 {
		var pe *PeerError
		if errs[r] == nil || !errors.As(errs[r], &pe) || pe.Rank != 2 || !strings.Contains(errs[r].Error(), "rank 2") {
			t.Fatalf("rank %d: got %v, want an error naming rank 2", r, errs[r])
		}
		t.Logf("rank %d: %v", r, errs[r])
		// The Comm stays broken.
		if err := comms[r].AllReduceSum(make([]float32, 3)); err == nil {
			t.Fatalf("rank %d: all-reduce after a failure succeeded", r)
		}
	}
}

func TestPeerClosesInProc(t *testing.T) { testPeerCloses(t, "inproc") }
func TestPeerClosesTCP(t *testing.T)    { testPeerCloses(t, "tcp") }

// testHungPeer: rank 1 never joins; rank 0 gives up at the deadline with an
// error naming rank 1.
func testHungPeer(t *testing.T, kind string) {
	timeout := 300 * time.Millisecond
	ts := group(t, kind, 2, timeout)
	c := NewComm(ts[0])
	start := time.Now()
	err := c.AllReduce(make([]float32, 10), OneShot)
	el := time.Since(start)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("got %v, want a timeout naming rank 1", err)
	}
	if el < timeout || el > timeout+2*time.Second {
		t.Fatalf("gave up after %v, deadline %v", el, timeout)
	}
	t.Log(err)
}

func TestHungPeerInProc(t *testing.T) { testHungPeer(t, "inproc") }
func TestHungPeerTCP(t *testing.T)    { testHungPeer(t, "tcp") }

// testDisagree: ranks that run different collectives fail with both tags.
func testDisagree(t *testing.T, kind string) {
	ts := group(t, kind, 2, 2*time.Second)
	c0, c1 := NewComm(ts[0]), NewComm(ts[1])
	errs := onAll(2, func(r int) error {
		if r == 0 {
			return c0.AllReduce(make([]float32, 8), OneShot)
		}
		return c1.AllReduce(make([]float32, 8), Ring)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "disagree") {
			t.Fatalf("rank %d: got %v, want a tag mismatch", r, err)
		}
	}
	// Different lengths under the same algorithm.
	ts = group(t, kind, 2, 2*time.Second)
	c0, c1 = NewComm(ts[0]), NewComm(ts[1])
	errs = onAll(2, func(r int) error {
		return []*Comm{c0, c1}[r].AllReduce(make([]float32, 8+r), OneShot)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "disagree on the tensor's size") {
			t.Fatalf("rank %d: got %v, want a size mismatch", r, err)
		}
	}
}

func TestDisagreeInProc(t *testing.T) { testDisagree(t, "inproc") }
func TestDisagreeTCP(t *testing.T)    { testDisagree(t, "tcp") }

// testNoAllocs: after warm-up, an all-reduce allocates nothing on any rank.
func testNoAllocs(t *testing.T, kind string, n int, algo Algo, length int) {
	ts := group(t, kind, n, 10*time.Second)
	comms := make([]*Comm, n)
	xs := make([][]float32, n)
	for r := range n {
		comms[r] = NewComm(ts[r])
		xs[r] = make([]float32, length)
	}
	const runs = 50
	for range 3 { // warm-up: buffers grow to size
		noErrors(t, onAll(n, func(r int) error { return comms[r].AllReduce(xs[r], algo) }))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := 1; r < n; r++ {
		wg.Go(func() {
			for range runs + 1 { // AllocsPerRun calls f once more to warm up
				if err := comms[r].AllReduce(xs[r], algo); err != nil {
					errs[r] = err
					return
				}
			}
		})
	}
	allocs := testing.AllocsPerRun(runs, func() {
		if err := comms[0].AllReduce(xs[0], algo); err != nil && errs[0] == nil {
			errs[0] = err
		}
	})
	wg.Wait()
	noErrors(t, errs)
	// The whole process is counted: a stray runtime allocation in another
	// goroutine could show as a fraction; anything per call shows as >= 1.
	if allocs >= 1 {
		t.Fatalf("%s %s world %d len %d: %.2f allocations per all-reduce, want 0", kind, algo, n, length, allocs)
	}
}

func TestNoAllocsInProc(t *testing.T) {
	testNoAllocs(t, "inproc", 3, OneShot, 4096)
	testNoAllocs(t, "inproc", 4, TwoShot, 10000)
	testNoAllocs(t, "inproc", 3, Ring, 10000)
}

func TestNoAllocsTCP(t *testing.T) {
	testNoAllocs(t, "tcp", 3, OneShot, 4096)
	testNoAllocs(t, "tcp", 3, TwoShot, 100000)
	testNoAllocs(t, "tcp", 3, Ring, 100000)
}

func TestChunk(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 8, 100} {
		for size := 1; size <= 5; size++ {
			prev := 0
			for i := range size {
				lo, hi := chunk(n, size, i)
				if lo != prev || hi < lo || hi-lo > n/size+1 {
					t.Fatalf("n=%d size=%d chunk %d = [%d,%d)", n, size, i, lo, hi)
				}
				prev = hi
			}
			if prev != n {
				t.Fatalf("n=%d size=%d: chunks end at %d", n, size, prev)
			}
		}
	}
}

// BenchmarkAllReduce measures each algorithm over loopback TCP (and in
// process) at decode and prefill sizes; with BenchmarkAllReduce/tcp/3 the
// crossover on this machine shows directly. Run with -benchtime=3x or more.
func BenchmarkAllReduce(b *testing.B) {
	for _, kind := range []string{"inproc", "tcp", "shm"} {
		for _, n := range []int{2, 3} {
			ts := group(b, kind, n, 30*time.Second)
			comms := make([]*Comm, n)
			for r := range n {
				comms[r] = NewComm(ts[r])
			}
			for _, bytes := range []int{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20} {
				for _, algo := range Algos() {
					b.Run(fmt.Sprintf("%s/%d/%dB/%s", kind, n, bytes, algo), func(b *testing.B) {
						xs := inputs(n, bytes/4, 1)
						b.SetBytes(int64(bytes))
						var wg sync.WaitGroup
						errs := make([]error, n)
						for r := 1; r < n; r++ {
							wg.Go(func() {
								for range b.N {
									if errs[r] = comms[r].AllReduce(xs[r], algo); errs[r] != nil {
										return
									}
								}
							})
						}
						b.ResetTimer()
						for range b.N { // not b.Loop: the other ranks must run exactly b.N
							if err := comms[0].AllReduce(xs[0], algo); err != nil {
								b.Fatal(err)
							}
						}
						wg.Wait()
						for r, err := range errs {
							if err != nil {
								b.Fatalf("rank %d: %v", r, err)
							}
						}
					})
				}
			}
		}
	}
}

func TestGrowAligned(t *testing.T) {
	for n := 1; n < 100; n++ {
		if b := grow(nil, n); len(b) != n || !aligned(b) || uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
			t.Fatalf("grow(nil, %d): len %d, aligned %v", n, len(b), aligned(b))
		}
	}
}

// TestUnalignedPayloads: a transport handing out payloads at odd addresses
// still gives correct, bit-identical sums (each peer's copy is its own).
func TestUnalignedPayloads(t *testing.T) {
	rs, err := NewInProc(3, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	comms := make([]*Comm, 3)
	for r := range 3 {
		comms[r] = NewComm(oddTransport{rs[r]})
	}
	xs := inputs(3, 7, 5)
	want := rankOrder(xs)
	noErrors(t, onAll(3, func(r int) error { return comms[r].AllReduce(xs[r], OneShot) }))
	for r := range 3 {
		for i := range want {
			if math.Float32bits(xs[r][i]) != math.Float32bits(want[i]) {
				t.Fatalf("rank %d [%d] = %v, want %v", r, i, xs[r][i], want[i])
			}
		}
	}
}

// oddTransport returns every payload at an address that is 1 mod 4.
type oddTransport struct{ *InProc }

func (o oddTransport) Recv(peer int, tag wire.Tag) ([]byte, error) {
	b, err := o.InProc.Recv(peer, tag)
	if err != nil {
		return nil, err
	}
	odd := make([]byte, len(b)+8)
	off := 0
	for uintptr(unsafe.Pointer(&odd[off]))%4 != 1 {
		off++
	}
	copy(odd[off:], b)
	return odd[off : off+len(b)], nil
}
