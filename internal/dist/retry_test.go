package dist

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"braid/internal/discover/dnstest"
)

// TestDialWaitsForLatePeer: a rank whose peer is not listening yet retries
// with growing waits, reporting each attempt, and connects once the peer
// listens, by a name that resolves through the configured resolver only.
// Err then says nothing is wrong, until the peer closes.
func TestDialWaitsForLatePeer(t *testing.T) {
	dns, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	if err := dns.SetHost("rank1.braid.test", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, dns.Addr())
	}}
	// A port that nothing listens on until the peer starts.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	addrs := []string{"", net.JoinHostPort("rank1.braid.test", itoa(port))}

	var mu sync.Mutex
	var retries []Retry
	started := make(chan struct{})
	var once sync.Once
	var ts [2]*TCP
	var errs [2]error
	var wg sync.WaitGroup
	wg.Go(func() {
		ts[0], errs[0] = Connect(context.Background(), MeshConfig{Rank: 0, Addrs: addrs, ConnectTimeout: 20 * time.Second, Logger: quiet, Resolver: res,
			OnRetry: func(r Retry) {
				mu.Lock()
				retries = append(retries, r)
				n := len(retries)
				mu.Unlock()
				if n >= 3 {
					once.Do(func() { close(started) })
				}
			}})
	})
	<-started
	wg.Go(func() {
		ts[1], errs[1] = Connect(context.Background(), MeshConfig{Rank: 1, Addrs: addrs, Listen: net.JoinHostPort("127.0.0.1", itoa(port)), ConnectTimeout: 20 * time.Second, Logger: quiet})
	})
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	defer ts[0].Close()
	mu.Lock()
	for i, r := range retries {
		if r.Attempt != i+1 || r.Rank != 1 || r.Addr != addrs[1] || r.Err == nil || r.Limit != 20*time.Second {
			t.Errorf("retry %d: %+v", i, r)
		}
		if i > 0 && r.Wait < retries[i-1].Wait {
			t.Errorf("retry %d waits %v, less than the one before (%v)", i, r.Wait, retries[i-1].Wait)
		}
	}
	if n := len(retries); n < 3 || retries[n-1].Wait <= retries[0].Wait {
		t.Errorf("no backoff over %d retries: %+v", n, retries)
	}
	mu.Unlock()
	if err := ts[0].Err(1); err != nil {
		t.Errorf("Err on a working connection: %v", err)
	}
	if err := ts[0].Err(0); err == nil {
		t.Error("Err(own rank) is nil")
	}
	ts[1].Close()
	deadline := time.Now().Add(5 * time.Second)
	for ts[0].Err(1) == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := ts[0].Err(1); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Err after the peer closed: %v", err)
	}
}

// TestDialGivesUp: a peer that never comes is reported with the attempts
// made, at ConnectTimeout.
func TestDialGivesUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Connect(context.Background(), MeshConfig{Rank: 0, Addrs: []string{"", addr}, ConnectTimeout: 300 * time.Millisecond, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "attempts") || !strings.Contains(err.Error(), addr) {
		t.Errorf("a peer that never listens: %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
