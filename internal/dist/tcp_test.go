package dist

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// listeners binds n loopback listeners on free ports.
func listeners(t testing.TB, n int) ([]net.Listener, []string) {
	t.Helper()
	lns := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns[i], addrs[i] = ln, ln.Addr().String()
	}
	return lns, addrs
}

// connectAll forms an n-rank loopback mesh; per-rank configs start from base
// and may be adjusted by tweak. It returns the transports (nil where
// Connect failed) and the errors.
func connectAll(t testing.TB, n int, base MeshConfig, tweak func(r int, c *MeshConfig)) ([]*TCP, []error) {
	t.Helper()
	lns, addrs := listeners(t, n)
	ts := make([]*TCP, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		cfg := base
		cfg.Rank, cfg.Addrs, cfg.Listener = r, addrs, lns[r]
		if cfg.Logger == nil {
			cfg.Logger = quiet
		}
		if cfg.ConnectTimeout == 0 {
			cfg.ConnectTimeout = 5 * time.Second
		}
		if tweak != nil {
			tweak(r, &cfg)
		}
		wg.Go(func() { ts[r], errs[r] = Connect(context.Background(), cfg) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, tr := range ts {
			if tr != nil {
				tr.Close()
			}
		}
	})
	return ts, errs
}

func tcpGroup(t testing.TB, n int, base MeshConfig) []Transport {
	t.Helper()
	ts, errs := connectAll(t, n, base, nil)
	out := make([]Transport, n)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		out[r] = ts[r]
	}
	return out
}
