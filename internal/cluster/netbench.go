package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"braid/internal/dist"
	"braid/internal/dist/wire"
)

// netbenchMsg asks a worker to join a netbench mesh as Rank of World.
type netbenchMsg struct {
	Rank      int                 `json:"rank"`
	Addrs     []string            `json:"addrs"`
	TimeoutMS int64               `json:"timeout_ms"`
	Stripes   int                 `json:"stripes"`
	Config    dist.NetbenchConfig `json:"config"`
}

// Netbench measures the links between this node (rank 0) and the workers of
// cfg (in their order) over the data plane the cluster would use: the same
// listeners, per-pair addresses and secret. The workers keep any model they
// hold; their data-plane mesh closes, and the next step re-forms it.
func Netbench(ctx context.Context, cfg Config, nb dist.NetbenchConfig) (*dist.NetbenchReport, error) {
	if len(cfg.Nodes) == 0 {
		return nil, errors.New("cluster: netbench needs workers")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = dist.DefaultTimeout
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Build == "" {
		cfg.Build = dist.BuildDigest()
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger}
	for i, n := range cfg.Nodes {
		c.workers = append(c.workers, &worker{rank: i + 1, node: n})
	}
	defer func() {
		for _, w := range c.workers {
			c.closeSession(w)
		}
	}()
	if err := c.dialAll(ctx, c.cfg.ConnectTimeout, false); err != nil {
		return nil, err
	}
	world := len(c.workers) + 1
	addrs := make([][]string, world)
	for i := range addrs {
		addrs[i] = make([]string, world)
		for j := i + 1; j < world; j++ {
			a, err := c.dataAddr(i, j)
			if err != nil {
				return nil, err
			}
			addrs[i][j] = a
		}
	}
	for _, w := range c.workers {
		payload, err := appendJSON(nil, kindNetbench, &netbenchMsg{Rank: w.rank, Addrs: addrs[w.rank], TimeoutMS: cfg.Timeout.Milliseconds(),
			Stripes: max(cfg.Stripes, 1), Config: nb})
		if err != nil {
			return nil, err
		}
		if err := c.send(w, payload); err != nil {
			return nil, err
		}
	}
	// The data plane's transport, shared memory between same-host ranks
	// included (dist.ShmDefault), so that netbench measures what steps use.
	mesh, err := dist.Connect(ctx, dist.MeshConfig{Rank: 0, Addrs: addrs[0], Secret: cfg.Secret, TLS: cfg.TLS, Stripes: max(cfg.Stripes, 1),
		Timeout: cfg.Timeout, ConnectTimeout: 2 * cfg.Timeout, Build: cfg.Build, Logger: c.log, Shm: dist.ShmDefault()})
	var rep *dist.NetbenchReport
	var errs []error
	if err != nil {
		errs = append(errs, c.meshErr(err))
	} else {
		rep, err = dist.Netbench(ctx, dist.NewComm(mesh), nb)
		if err != nil {
			errs = append(errs, c.meshErr(err))
			mesh.Close() // the workers fail at once, not at their deadline
		}
		mesh.Close()
	}
	for _, w := range c.workers {
		if _, err := c.recv(w, nil); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cluster: netbench: %w", err)
	}
	return rep, nil
}

// netbench runs a worker's side of a netbench: it joins the mesh on its
// data listener (closing the model's), runs the same measurements as every
// rank, and closes it.
func (w *Worker) netbench(ctx context.Context, m *netbenchMsg) error {
	if m.Rank < 1 || m.Rank >= len(m.Addrs) || len(m.Addrs) > 1024 {
		return fmt.Errorf("%w: netbench as rank %d of %d", wire.ErrMalformed, m.Rank, len(m.Addrs))
	}
	nb := m.Config
	if nb.MaxBytes > 1<<30 || nb.BWBytes > 1<<30 || nb.PingBytes > 1<<30 || nb.PingIters > 1<<24 || nb.BWIters > 1<<20 {
		return fmt.Errorf("%w: netbench sizes beyond 1 GiB or iterations beyond limits", wire.ErrMalformed)
	}
	w.closeMesh()
	timeout := time.Duration(m.TimeoutMS) * time.Millisecond
	if timeout <= 0 || timeout > time.Hour {
		timeout = w.cfg.Timeout
	}
	tr, err := dist.Connect(ctx, dist.MeshConfig{Rank: m.Rank, Addrs: m.Addrs, Listener: w.data, Secret: w.cfg.Secret, TLS: w.cfg.TLS,
		Stripes: max(m.Stripes, 1), Timeout: timeout, ConnectTimeout: 2 * timeout, Build: w.cfg.Build, Logger: w.log,
		Shm: dist.ShmDefault()})
	if err != nil {
		return err
	}
	defer tr.Close()
	w.log.Info("worker: netbench", "rank", m.Rank, "ranks", len(m.Addrs))
	_, err = dist.Netbench(ctx, dist.NewComm(tr), nb)
	return err
}
