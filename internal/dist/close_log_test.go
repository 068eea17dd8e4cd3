package dist

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the transports' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestOrderlyCloseNoWarning: a peer that closes its transport in order ends
// the other side's connection without a warning (a worker logged one at
// the end of every normal session); a peer that vanishes still warns.
func TestOrderlyCloseNoWarning(t *testing.T) {
	for _, orderly := range []bool{true, false} {
		var logs [2]syncBuffer
		ts, errs := connectAll(t, 2, MeshConfig{}, func(r int, c *MeshConfig) {
			c.Logger = slog.New(slog.NewTextHandler(&logs[r], &slog.HandlerOptions{Level: slog.LevelInfo}))
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		if orderly {
			ts[0].Close()
		} else {
			// no Close frame: the sockets just go
			for _, c := range ts[0].peers[1].conns {
				c.nc.Close()
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(logs[1].String(), "closed the connection") && !strings.Contains(logs[1].String(), "closing connection") {
			if time.Now().After(deadline) {
				t.Fatalf("orderly %v: rank 1 logged nothing of the close: %s", orderly, logs[1].String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		warned := strings.Contains(logs[1].String(), "level=WARN")
		if warned == orderly {
			t.Errorf("orderly %v: rank 1 warned %v:\n%s", orderly, warned, logs[1].String())
		}
	}
}
