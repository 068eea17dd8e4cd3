package dist

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/internal/dist/wire"
)

// The collectives' tests, with the data frames through shared memory.
func TestAllReduceShm(t *testing.T)  { testAllReduce(t, "shm", []int{1, 2, 3, 4}) }
func TestHelpersShm(t *testing.T)    { testHelpers(t, "shm") }
func TestPeerClosesShm(t *testing.T) { testPeerCloses(t, "shm") }
func TestHungPeerShm(t *testing.T)   { testHungPeer(t, "shm") }
func TestDisagreeShm(t *testing.T)   { testDisagree(t, "shm") }
func TestNoAllocsShm(t *testing.T) {
	testNoAllocs(t, "shm", 3, OneShot, 4096)
	testNoAllocs(t, "shm", 3, TwoShot, 100000)
	testNoAllocs(t, "shm", 3, Ring, 100000)
}

// TestShmUsed: ranks on one host that both ask for it carry their data
// frames through shared memory (the peer's kind says so, and the file is
// gone from /dev/shm once mapped); a pair where one end does not ask keeps
// TCP, and its frames still arrive.
func TestShmUsed(t *testing.T) {
	before, _ := filepath.Glob(filepath.Join(shmDir, "braid-*"))
	ts := tcpGroup(t, 3, MeshConfig{Timeout: 5 * time.Second, Shm: true})
	for r, tr := range ts {
		for p := range 3 {
			if p != r {
				if k := tr.Peer(p).Kind; k != "tcp+shm" {
					t.Errorf("rank %d to %d: %s, want tcp+shm", r, p, k)
				}
			}
		}
	}
	if k := ts[0].(*TCP).Kind(); k != "tcp+shm" {
		t.Errorf("the transport says %s, want tcp+shm", k)
	}
	after, _ := filepath.Glob(filepath.Join(shmDir, "braid-*"))
	if len(after) > len(before) {
		t.Errorf("shared-memory files left under %s: %v (before: %v)", shmDir, after, before)
	}

	mixed, errs := connectAll(t, 2, MeshConfig{Timeout: 5 * time.Second}, func(r int, c *MeshConfig) { c.Shm = r == 0 })
	noErrors(t, errs)
	for r, tr := range mixed {
		if k := tr.Peer(1 - r).Kind; k != "tcp" || tr.Kind() != "tcp" {
			t.Errorf("mixed pair, rank %d: %s (transport %s), want tcp", r, k, tr.Kind())
		}
	}
	noErrors(t, onAll(2, func(r int) error {
		c := NewComm(mixed[r])
		x := []float32{float32(r + 1)}
		if err := c.AllReduceSum(x); err != nil {
			return err
		}
		if x[0] != 3 {
			return fmt.Errorf("sum %v, want 3", x[0])
		}
		return nil
	}))
}

// TestShmLargeMessages: messages several times the ring's size stream
// through it, both ways at once, byte for byte, with the counters of a
// TCP pair.
func TestShmLargeMessages(t *testing.T) {
	ts := tcpGroup(t, 2, MeshConfig{Timeout: 10 * time.Second, Shm: true})
	rng := rand.New(rand.NewPCG(3, 4))
	sizes := []int{0, 1, 7, 4096, shmRingSize - 40, shmRingSize, 3*shmRingSize + 12345}
	msgs := make([][][]byte, 2)
	for r := range 2 {
		for _, n := range sizes {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			msgs[r] = append(msgs[r], b)
		}
	}
	noErrors(t, onAll(2, func(r int) error {
		for i, m := range msgs[r] {
			tag := wire.Tag{Step: uint64(i), Op: wire.OpSendRecv}
			if err := ts[r].Post(1-r, tag, m); err != nil {
				return err
			}
			got, err := ts[r].Recv(1-r, tag)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, msgs[1-r][i]) {
				return fmt.Errorf("message %d (%d bytes) from rank %d differs", i, len(msgs[1-r][i]), 1-r)
			}
			if err := ts[r].Flush(1 - r); err != nil {
				return err
			}
		}
		return nil
	}))
	for r := range 2 {
		s := ts[r].Stats().Peers[1-r]
		total := 0
		for _, n := range sizes {
			total += n
		}
		if s.FramesSent != uint64(len(sizes)) || s.FramesRecv != uint64(len(sizes)) || s.BytesSent != uint64(total) || s.BytesRecv != uint64(total) {
			t.Errorf("rank %d counters %+v, want %d frames and %d bytes each way", r, s, len(sizes), total)
		}
	}
}

// TestShmPeerDies: a rank waiting on shared memory for a peer whose
// connection ends (the peer's process is gone) fails at once, naming it,
// not at the deadline.
func TestShmPeerDies(t *testing.T) {
	ts := tcpGroup(t, 2, MeshConfig{Timeout: 20 * time.Second, Shm: true})
	done := make(chan error, 1)
	go func() {
		_, err := ts[0].Recv(1, wire.Tag{Op: wire.OpSendRecv})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	// As a killed process: the socket closes without a goodbye.
	for _, c := range ts[1].(*TCP).peers[0].conns {
		c.nc.Close()
	}
	select {
	case err := <-done:
		var pe *PeerError
		if !errors.As(err, &pe) || pe.Rank != 1 {
			t.Fatalf("got %v, want an error naming rank 1", err)
		}
		t.Log(err)
	case <-time.After(5 * time.Second):
		t.Fatal("the wait on shared memory did not end when the peer's connection did")
	}
}

// TestShmRefused: an offer the peer cannot map (another host's file, or
// one replaced under the same name) leaves the pair on TCP.
func TestShmRefused(t *testing.T) {
	cfg := MeshConfig{Timeout: time.Second, Spin: -1}
	cfg.normalize()
	l, offer, err := createShm(cfg)
	if err != nil {
		t.Fatalf("making a shared-memory ring (Linux always has %s): %v", shmDir, err)
	}
	defer l.unmap()
	defer os.Remove(offer.Path)
	bad := bytes.Repeat([]byte{1}, shmCookieLen)
	if _, err := openShm(cfg, offer.Path, offer.Size, bad); err == nil || !strings.Contains(err.Error(), "cookie") {
		t.Errorf("a wrong cookie: %v", err)
	}
	if _, err := openShm(cfg, "/tmp/elsewhere", offer.Size, bad); err == nil {
		t.Error("a file outside the shared-memory directory was mapped")
	}
	if _, err := openShm(cfg, filepath.Join(shmDir, "braid-no-such-file"), offer.Size, bad); err == nil {
		t.Error("a missing file was mapped")
	}
}

// TestSleepsCounted: a receive whose frame comes long after the spin time
// counts one sleep, over TCP and shared memory; one whose frame is already
// there counts none.
func TestSleepsCounted(t *testing.T) {
	for _, shm := range []bool{false, true} {
		ts := tcpGroup(t, 2, MeshConfig{Timeout: 5 * time.Second, Spin: 100 * time.Microsecond, Shm: shm})
		tag := wire.Tag{Op: wire.OpSendRecv}
		noErrors(t, onAll(2, func(r int) error {
			if r == 1 {
				time.Sleep(200 * time.Millisecond) // far beyond the spin
				return ts[1].Send(0, tag, []byte("late"))
			}
			_, err := ts[0].Recv(1, tag)
			return err
		}))
		if s := ts[0].Stats().Peers[1].Sleeps; s != 1 {
			t.Errorf("shm %v: a frame 200 ms late counted %d sleeps, want 1", shm, s)
		}
		if err := ts[1].Send(0, tag, []byte("early")); err != nil {
			t.Fatal(err)
		}
		if _, err := ts[0].Recv(1, tag); err != nil {
			t.Fatal(err)
		}
		if s := ts[0].Stats().Peers[1].Sleeps; s != 1 {
			t.Errorf("shm %v: a frame already there counted a sleep (%d in all)", shm, s)
		}
	}
}

// TestStaleShmRemoved: a file left by a process that is gone is removed
// when the next pair forms; one of a live process is kept.
func TestStaleShmRemoved(t *testing.T) {
	dead := filepath.Join(shmDir, "braid-999999999-0123456789abcdef")
	live := filepath.Join(shmDir, fmt.Sprintf("braid-%d-fedcba9876543210", os.Getppid()))
	for _, p := range []string{dead, live} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatalf("writing a ring file in %s (Linux always has it): %v", shmDir, err)
		}
	}
	defer os.Remove(live)
	tcpGroup(t, 2, MeshConfig{Timeout: 5 * time.Second, Shm: true})
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		os.Remove(dead)
		t.Errorf("the file of a process that is gone was kept (%v)", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the file of a live process was removed: %v", err)
	}
}
