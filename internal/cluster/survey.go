package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"braid/internal/dist"
	"braid/internal/gguf"
	"braid/internal/model"
	"braid/internal/plan"
)

// Survey is what `braid plan` learns from the workers without loading
// anything: each one's facts (the memory it offers for a shard), then, for
// a plan, where each would take its weights from at a Load. It holds a
// session to every worker that answered until Close; a worker serves one
// coordinator at a time, so it answers the survey only while no other
// coordinator holds it.
type Survey struct {
	c     *Cluster
	Nodes []NodeInfo // rank 1 first, in rank order
}

// NodeInfo is one worker as a survey found it.
type NodeInfo struct {
	Rank int
	Addr string
	// Err says why the worker could not be asked (not reachable, another
	// build, another secret, busy with another coordinator); the rest is
	// then unknown.
	Err error
	// Mem is the memory the worker offers for a shard (0 = unknown).
	Mem     int64
	Threads int
	Cores   int
}

// Ask opens a session to every worker of cfg.Nodes at once (the handshake
// checks the protocol, the build digest and the secret) and asks each for
// its facts. A worker that does not answer within cfg.ConnectTimeout (5 s
// when 0) is reported in its NodeInfo, not as an error. Of cfg it reads
// the model, the nodes, the secret, the timeouts, the hub reference,
// MaxBatch (which a Load names), Progress and Logger.
func Ask(ctx context.Context, cfg Config) *Survey {
	if cfg.Timeout <= 0 {
		cfg.Timeout = dist.DefaultTimeout
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Build == "" {
		cfg.Build = dist.BuildDigest()
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger}
	s := &Survey{c: c}
	for i, n := range cfg.Nodes {
		c.workers = append(c.workers, &worker{rank: i + 1, node: n})
		s.Nodes = append(s.Nodes, NodeInfo{Rank: i + 1, Addr: n.Addr})
	}
	var wg sync.WaitGroup
	for i, w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := &s.Nodes[i]
			if w.node.Addr == "" {
				n.Err = errors.New("no address")
				return
			}
			if err := c.dial(ctx, w, c.cfg.ConnectTimeout, false); err != nil {
				c.closeSession(w)
				n.Err = err
				return
			}
			n.Mem, n.Threads, n.Cores = w.info.Mem, w.info.Threads, w.info.Facts.Cores
		}()
	}
	wg.Wait()
	return s
}

// Source is where one rank takes its weights from at a Load.
type Source struct {
	Rank int
	Addr string // the worker's address; "local" for rank 0
	// Action is SourceRead, SourcePull or SourceReceive; empty when Err
	// says why the worker could not be asked, or could not say.
	Action string
	// Bytes are what the action moves: the bytes of its shard it reads
	// (0 when it holds the shard already), the bytes it downloads from
	// the hub, or the shard's bytes the coordinator streams to it.
	Bytes int64
	// Shard is the bytes of the rank's slices of the model: what it reads
	// from a copy, and what a stream carries.
	Shard int64
	// Where says where the weights come from, for a person.
	Where string
	Err   error
	// Unreachable says Err is why the worker could not be asked at all.
	Unreachable bool
}

// Sources asks every worker that answered Ask where the weights of its
// shard in p would come from at a Load of the model (f is cfg.Model
// opened), and says so for rank 0 too (this node reads its shard of the
// file). The model is identified by its SHA-256 (hashed once and
// remembered, as Open does) and, when it came from a hub, by its hub
// reference; the workers answer as their Load would decide, loading and
// fetching nothing.
func (s *Survey) Sources(f *gguf.Model, p *plan.Plan) ([]Source, error) {
	c := s.c
	if len(p.Ranks) != len(c.workers)+1 {
		return nil, fmt.Errorf("cluster: a plan of %d ranks for %d workers", len(p.Ranks), len(c.workers))
	}
	abs, err := filepath.Abs(c.cfg.Model)
	if err != nil {
		return nil, err
	}
	c.progress("hashing %s", abs)
	sha, size, err := newHashCache(c.cfg.HashCacheDir).SHA256(abs)
	if err != nil {
		return nil, fmt.Errorf("cluster: model identity: %w", err)
	}
	mc, err := model.ReadConfig(f)
	if err != nil {
		return nil, err
	}
	tensors := tensorInfos(f)
	out := make([]Source, len(p.Ranks))
	for i := range p.Ranks {
		sh := p.Ranks[i].Shard
		sh.Notes = nil
		pieces, err := shardPieces(tensors, mc, &sh)
		if err != nil {
			return nil, fmt.Errorf("rank %d: %w", i, err)
		}
		out[i] = Source{Rank: i, Addr: p.Ranks[i].Name, Shard: piecesBytes(pieces)}
	}
	out[0].Addr = "local"
	out[0].Action, out[0].Bytes, out[0].Where = SourceRead, out[0].Shard, "its shard of "+abs
	world := len(p.Ranks)
	payloads := make([][]byte, len(c.workers))
	for i, w := range c.workers {
		src := &out[i+1]
		src.Addr = w.node.Addr
		if err := s.Nodes[i].Err; err != nil {
			src.Err, src.Unreachable = err, true
			continue
		}
		path := w.node.Model
		if path == "" {
			path = abs
		}
		m := loadMsg{SHA256: sha, Path: path, Size: size, Rank: w.rank, World: world, TP: p.Mode.TP, PP: p.Mode.PP,
			Shard: p.Ranks[w.rank].Shard, MaxBatch: c.cfg.MaxBatch, Ctx: p.Ctx, Positions: p.Ctx * max(p.Parallel, 1),
			KVF32: p.KVF32, Stream: true, Hub: c.cfg.Hub}
		m.Shard.Notes = nil
		if payloads[i], err = appendJSON(nil, kindInfo, &m); err != nil {
			return nil, err
		}
	}
	var wg sync.WaitGroup
	for i, w := range c.workers {
		if payloads[i] == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := &out[i+1]
			progress := func(l string) { c.progress("%s: %s", c.describe(w.rank), l) }
			b, err := c.call(w, payloads[i], progress)
			var info infoMsg
			if err == nil {
				if err = parseJSON(b, &info); err != nil {
					err = c.sessErr(w, err)
				}
			}
			if err == nil && info.Source == nil {
				// A build that does not know the question answers Info alone.
				err = c.sessErr(w, errors.New("the worker did not say where its model would come from"))
			}
			if err != nil {
				src.Err = err
				return
			}
			src.describe(info.Source)
		}()
	}
	wg.Wait()
	return out, nil
}

// describe fills in the source from a worker's answer.
func (src *Source) describe(a *sourceMsg) {
	src.Action = a.Action
	switch a.Action {
	case SourceRead:
		src.Bytes = src.Shard
		switch a.From {
		case fromLoaded:
			src.Bytes, src.Where = 0, "holds this shard already ("+a.Path+")"
		case fromPath:
			src.Where = "its copy at " + a.Path
		case fromModelsDir:
			src.Where = "its copy under --models-dir: " + a.Path
		case fromHubCache:
			src.Where = "its hub cache " + a.Path
		case fromShardCache:
			src.Where = "the shard it received before: " + a.Path
		case fromShardFile:
			src.Where = "a shard file under --models-dir: " + a.Path
		default:
			src.Where = a.Path
		}
	case SourcePull:
		src.Bytes = a.Pull
		src.Where = fmt.Sprintf("from the hub %s into its hub cache %s, then reads its shard (%s)", a.Endpoint, a.Path, formatBytes(src.Shard))
	case SourceReceive:
		src.Bytes = src.Shard
		src.Where = "its shard streamed from this node: " + a.Why
	default:
		src.Action = ""
		src.Err = fmt.Errorf("it has no way to the model: %s", a.Why)
	}
}

// Close ends the survey's sessions; the workers keep whatever they hold.
func (s *Survey) Close() {
	for _, w := range s.c.workers {
		s.c.closeSession(w)
	}
}
