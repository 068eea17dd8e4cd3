package dist

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"braid/internal/dist/wire"
)

// Ranks on the same host (several processes on one machine, or one rank
// per socket of a big one) can carry their data frames through shared
// memory instead of loopback TCP: an all-reduce then costs a copy and a
// poll of memory instead of a system call per frame on each side and a
// hand-off through the connection's reader goroutine. As NCCL uses shared
// memory within a node and the network between nodes, a pair uses it when
// both ends can map the same file and falls back to TCP otherwise. The TCP
// connection stays: it carries control frames, and its end (a peer that
// died or closed) fails the shared-memory waits too.
//
// Forming: once the mesh's connections are up and before their readers
// start, every pair exchanges one offer and one answer on its first
// connection (always, so that both ends read the same frames): the lower
// rank offers a fresh file under /dev/shm (mode 0600, a random name and
// cookie) or nothing; the higher rank maps it and checks the cookie, or
// says why not. Both unlink the file as soon as it is mapped.

// shmOffer is the lower rank's offer: an empty Path offers nothing.
type shmOffer struct {
	Path   string `json:"path,omitempty"`
	Cookie string `json:"cookie,omitempty"` // hex, also written at the file's start
	Size   int64  `json:"size,omitempty"`
}

// negotiateShm runs the offer and answer on every pair, lower ranks first
// (a rank answers its lower peers, then offers to its higher ones, so no
// two ranks wait on each other). A pair whose exchange fails fails Connect;
// a pair that cannot share memory keeps TCP and says why in the log.
func (t *TCP) negotiateShm() error {
	for j, p := range t.peers {
		if p == nil {
			continue
		}
		c := p.conns[0]
		c.nc.SetDeadline(time.Now().Add(min(t.cfg.Timeout, 10*time.Second)))
		var err error
		if j < t.rank {
			err = t.answerShm(p)
		} else {
			err = t.offerShm(p)
		}
		c.nc.SetDeadline(time.Time{})
		if err != nil {
			return &PeerError{Rank: j, Addr: p.addr, What: "shared-memory offer", Err: err}
		}
		if p.shm != nil {
			p.shm.sleeps = &p.stats.sleeps
			t.log.Info("dist: data frames through shared memory (same host)", "rank", t.rank, "peer", j, "ring_bytes", shmRingSize)
		}
	}
	return nil
}

func shmFrame(nc net.Conn, payload []byte) error {
	_, err := nc.Write(wire.Append(nil, wire.Header{Type: wire.TypeControl, Tag: wire.Tag{Op: wire.OpShm}, Stripes: 1}, payload))
	return err
}

func (t *TCP) readShmFrame(nc net.Conn) ([]byte, error) {
	var hdr [wire.HeaderSize]byte
	h, p, err := wire.ReadFrame(nc, hdr[:], nil, t.cfg.Limits)
	if err != nil {
		return nil, err
	}
	if h.Type == wire.TypeError {
		return nil, fmt.Errorf("the peer refused: %s", clip(p))
	}
	if h.Type != wire.TypeControl || h.Tag.Op != wire.OpShm {
		return nil, fmt.Errorf("%w: %s frame %s where the shared-memory exchange was expected", wire.ErrMalformed, h.Type, h.Tag)
	}
	return p, nil
}

func (t *TCP) offerShm(p *tcpPeer) error {
	var offer shmOffer
	var l *shmLink
	if t.cfg.Shm {
		var err error
		if l, offer, err = createShm(t.cfg); err != nil {
			t.log.Info("dist: no shared memory for this pair", "rank", t.rank, "peer", p.rank, "err", err)
		}
	}
	b, _ := json.Marshal(&offer)
	if err := shmFrame(p.conns[0].nc, b); err != nil {
		if l != nil {
			l.unmap()
		}
		return err
	}
	ans, err := t.readShmFrame(p.conns[0].nc)
	if l != nil {
		removeShm(offer.Path) // mapped on both sides, or refused: the name is no longer needed
	}
	if err != nil {
		if l != nil {
			l.unmap()
		}
		return err
	}
	if l == nil {
		return nil
	}
	if string(ans) != "ok" {
		t.log.Info("dist: the peer keeps TCP for data frames", "rank", t.rank, "peer", p.rank, "reason", clip(ans))
		l.unmap()
		return nil
	}
	p.shm = l
	return nil
}

func (t *TCP) answerShm(p *tcpPeer) error {
	b, err := t.readShmFrame(p.conns[0].nc)
	if err != nil {
		return err
	}
	var offer shmOffer
	if err := json.Unmarshal(b, &offer); err != nil {
		return fmt.Errorf("%w: shared-memory offer is not valid JSON: %v", wire.ErrMalformed, err)
	}
	answer := "no: nothing offered"
	var l *shmLink
	if offer.Path != "" {
		cookie, herr := hex.DecodeString(offer.Cookie)
		switch {
		case !t.cfg.Shm:
			answer = "no: shared memory is off on this rank"
		case herr != nil || len(cookie) != shmCookieLen:
			answer = "no: malformed cookie"
		default:
			if l, err = openShm(t.cfg, offer.Path, offer.Size, cookie); err != nil {
				answer = "no: " + err.Error()
			} else {
				answer = "ok"
			}
		}
	}
	if err := shmFrame(p.conns[0].nc, []byte(answer)); err != nil {
		if l != nil {
			l.unmap()
		}
		return err
	}
	p.shm = l
	return nil
}

// ShmDefault is whether a rank asks for shared memory with same-host peers
// (MeshConfig.Shm) unless told otherwise: yes, unless the environment sets
// BRAID_NO_SHM (to any value but "" or "0"), which A/B measurements of
// the TCP path use.
func ShmDefault() bool {
	v := os.Getenv("BRAID_NO_SHM")
	return v == "" || v == "0"
}
