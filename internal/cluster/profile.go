package cluster

import (
	"encoding/json"
	"fmt"
	"time"

	"braid/internal/dist"
	"braid/internal/dist/wire"
)

// profiler accumulates one rank's step timings while profiling is on
// (`braid bench --profile`). It is owned by the goroutine that runs the
// rank's steps. When profiling is off the rank holds no profiler (a nil
// pointer checked once per collective and per step), so the ordinary path
// neither allocates nor reads the clock.
//
// A step's time on a rank splits into compute, all-reduce waits (from the
// call to the summed result: sending, waiting for the peers, summing) and
// pipeline waits (receiving the hidden state from the previous stage, which
// includes that stage's compute, and sending it on). Idle is the time
// between the end of one step and the start of the next on this rank:
// returning the result, the coordinator's sampling and the next request.
// Per layer, compute is the time between two all-reduces: with tensor
// parallelism a layer makes two (attention, FFN), so all-reduce k ends the
// compute of layer k/2; without all-reduces a rank's layers are not told
// apart and only the totals are kept.
type profiler struct {
	layers    int // layers this rank runs
	stepStart time.Time
	mark      time.Time // end of the last wait, or the step's start
	lastEnd   time.Time // end of the previous step
	call      int       // all-reduce index in the step

	steps                                  uint64
	busy, arWait, stage, idle              time.Duration
	allReduces, allReduceBytes, stageBytes uint64
	layerCompute, layerAllReduce           []time.Duration
	tail                                   time.Duration // compute after the last all-reduce of a step
	mesh0                                  meshTotals    // the data plane's counters at the start
}

func newProfiler(layers int, mesh meshTotals) *profiler {
	return &profiler{layers: layers, layerCompute: make([]time.Duration, layers),
		layerAllReduce: make([]time.Duration, layers), mesh0: mesh}
}

func (p *profiler) beginStep() {
	now := time.Now()
	if !p.lastEnd.IsZero() {
		p.idle += now.Sub(p.lastEnd)
	}
	p.stepStart, p.mark, p.call = now, now, 0
}

func (p *profiler) endStep() {
	now := time.Now()
	p.tail += now.Sub(p.mark)
	p.busy += now.Sub(p.stepStart)
	p.lastEnd = now
	p.steps++
}

// allReduceDone records one all-reduce that ran from t0 to t1 over n floats.
func (p *profiler) allReduceDone(t0, t1 time.Time, n int) {
	c, w := t0.Sub(p.mark), t1.Sub(t0)
	p.arWait += w
	p.allReduces++
	p.allReduceBytes += uint64(4 * n)
	if p.layers > 0 {
		l := (p.call / 2) % p.layers
		p.layerCompute[l] += c
		p.layerAllReduce[l] += w
	}
	p.call++
	p.mark = t1
}

// stageWait records a pipeline send or receive from t0 to t1.
func (p *profiler) stageWait(t0, t1 time.Time, n int) {
	p.stage += t1.Sub(t0)
	p.stageBytes += uint64(4 * n)
	p.mark = t1
}

// RankProfile is one rank's share of the profiled steps (sums over them).
type RankProfile struct {
	Rank  int    `json:"rank"`
	Addr  string `json:"addr"`
	Shard string `json:"shard"`
	Steps uint64 `json:"steps"`
	// Busy is the time in the rank's step (Compute + AllReduce + Stage);
	// Idle the time between its steps.
	Busy      time.Duration `json:"busy_ns"`
	Compute   time.Duration `json:"compute_ns"`
	AllReduce time.Duration `json:"allreduce_ns"`
	Stage     time.Duration `json:"stage_ns"`
	Idle      time.Duration `json:"idle_ns"`
	// AllReduces counts the all-reduces, AllReduceBytes their vectors'
	// bytes; StageBytes the hidden states sent and received.
	AllReduces     uint64 `json:"allreduces"`
	AllReduceBytes uint64 `json:"allreduce_bytes"`
	StageBytes     uint64 `json:"stage_bytes"`
	// BytesSent is everything the rank sent on the data plane.
	BytesSent uint64 `json:"bytes_sent"`
	// Sleeps counts the data receives that polled for the spin time in
	// vain and slept until the peer's frame came (dist.PeerStats.Sleeps):
	// a peer that late is usually one that lost its CPU.
	Sleeps uint64 `json:"sleeps"`
	// LayerCompute and LayerAllReduce are per layer of the rank's range
	// (First first), present when the rank's layers end in all-reduces;
	// HeadCompute is the compute after the last all-reduce (final norm,
	// output head) or, without all-reduces, all of it.
	First          int             `json:"first_layer"`
	LayerCompute   []time.Duration `json:"layer_compute_ns,omitempty"`
	LayerAllReduce []time.Duration `json:"layer_allreduce_ns,omitempty"`
	HeadCompute    time.Duration   `json:"head_compute_ns"`
}

// report turns the accumulated times into a RankProfile.
func (p *profiler) report(rank int, r *rank, mesh meshTotals) RankProfile {
	rp := RankProfile{Rank: rank, Shard: r.sh.String(), Steps: p.steps, Busy: p.busy, AllReduce: p.arWait, Stage: p.stage,
		Idle: p.idle, AllReduces: p.allReduces, AllReduceBytes: p.allReduceBytes, StageBytes: p.stageBytes,
		BytesSent: mesh.sent - p.mesh0.sent, Sleeps: mesh.sleeps - p.mesh0.sleeps, First: r.sh.First, HeadCompute: p.tail}
	rp.Compute = p.busy - p.arWait - p.stage
	if p.allReduces > 0 {
		rp.LayerCompute, rp.LayerAllReduce = p.layerCompute, p.layerAllReduce
	}
	return rp
}

// meshTotals are a rank's data-plane counters summed over its peers.
type meshTotals struct{ sent, sleeps uint64 }

// meshSent is what a rank has sent and slept on its data plane so far.
func meshSent(t *dist.TCP) meshTotals {
	var m meshTotals
	if t == nil {
		return m
	}
	for _, ps := range t.Stats().Peers {
		m.sent += ps.BytesSent
		m.sleeps += ps.Sleeps
	}
	return m
}

// Profile is what `braid bench --profile` reports: every rank's times over
// the profiled steps, the steps' wall time as the coordinator saw it, and
// the frames exchanged with each worker.
type Profile struct {
	Steps uint64 `json:"steps"`
	// StepTime is the coordinator's wall time in the profiled steps, from
	// sending the Step frames to holding every result.
	StepTime time.Duration `json:"step_ns"`
	Ranks    []RankProfile `json:"ranks"`
	// CriticalCompute is the compute on the step's critical path: per
	// pipeline stage the slowest rank's compute, summed over the stages.
	CriticalCompute time.Duration `json:"critical_compute_ns"`
	// CommShare is 1 - CriticalCompute/StepTime: the share of the step
	// that is not compute on the critical path (all-reduces and their
	// imbalance, hidden states between stages, Step frames and results).
	CommShare float64          `json:"comm_share"`
	Frames    []FramesPerStep  `json:"frames"`
	Mode      string           `json:"split"`
	Counters  []WorkerCounters `json:"-"`
}

// FramesPerStep are the session frames between the coordinator and one
// worker during the profiled steps, per step.
type FramesPerStep struct {
	Rank     int     `json:"rank"`
	Addr     string  `json:"addr"`
	Sent     float64 `json:"sent_per_step"`
	Received float64 `json:"received_per_step"`
}

// Profile request payloads (after kindProfile).
const (
	profStart byte = 1
	profStop  byte = 0
)

// startProfile turns profiling on for r (mesh: its data plane).
func (r *rank) startProfile(mesh *dist.TCP) {
	p := newProfiler(r.sh.Last-r.sh.First, meshSent(mesh))
	r.prof = p
	r.comm.prof = p
	if r.stage != nil {
		r.stage.prof = p
	}
}

// stopProfile turns profiling off and reports.
func (r *rank) stopProfile(rankNo int, mesh *dist.TCP) (RankProfile, error) {
	p := r.prof
	if p == nil {
		return RankProfile{}, fmt.Errorf("rank %d: profiling was not started", rankNo)
	}
	r.prof, r.comm.prof = nil, nil
	if r.stage != nil {
		r.stage.prof = nil
	}
	return p.report(rankNo, r, meshSent(mesh)), nil
}

// StartProfile turns profiling on on every rank: from now on each rank
// times its steps until StopProfile.
func (c *Cluster) StartProfile() error {
	if c.closed {
		return errNotFormed
	}
	if !c.formed {
		if err := c.reform(); err != nil {
			return err
		}
	}
	for _, w := range c.workers {
		if _, err := c.call(w, []byte{kindProfile, profStart}, nil); err != nil {
			return err
		}
	}
	c.local.startProfile(c.mesh)
	c.profSteps, c.profTime = 0, 0
	c.profCounters = c.liveCounters()
	c.profiling = true
	return nil
}

// StopProfile turns profiling off and gathers every rank's report.
func (c *Cluster) StopProfile() (*Profile, error) {
	if !c.profiling {
		return nil, fmt.Errorf("cluster: profiling was not started")
	}
	c.profiling = false
	after := c.liveCounters()
	p := &Profile{Steps: c.profSteps, StepTime: c.profTime, Mode: c.mode.String()}
	lp, err := c.local.stopProfile(0, c.mesh)
	if err != nil {
		return nil, err
	}
	lp.Addr = "this node"
	p.Ranks = append(p.Ranks, lp)
	for i, w := range c.workers {
		b, err := c.call(w, []byte{kindProfile, profStop}, nil)
		if err != nil {
			return nil, err
		}
		var rp RankProfile
		if err := parseJSON(b, &rp); err != nil {
			return nil, c.sessErr(w, err)
		}
		rp.Rank, rp.Addr = w.rank, w.node.Addr
		p.Ranks = append(p.Ranks, rp)
		if n := float64(p.Steps); n > 0 && i < len(after) && i < len(c.profCounters) {
			a, b := after[i], c.profCounters[i]
			p.Frames = append(p.Frames, FramesPerStep{Rank: w.rank, Addr: w.node.Addr,
				Sent: float64(a.FramesSent-b.FramesSent) / n, Received: float64(a.FramesReceived-b.FramesReceived) / n})
		}
	}
	tp := c.mode.TP
	for s := 0; s < c.mode.PP; s++ {
		var worst time.Duration
		for t := 0; t < tp; t++ {
			if r := s*tp + t; r < len(p.Ranks) {
				worst = max(worst, p.Ranks[r].Compute)
			}
		}
		p.CriticalCompute += worst
	}
	if p.StepTime > 0 {
		p.CommShare = max(0, 1-float64(p.CriticalCompute)/float64(p.StepTime))
	}
	return p, nil
}

// profileRequest answers a worker's kindProfile request.
func (w *Worker) profileRequest(p []byte) ([]byte, error) {
	if len(p) != 1 || p[0] > profStart {
		return nil, fmt.Errorf("%w: profile request of %d bytes", wire.ErrMalformed, len(p))
	}
	if w.cur == nil {
		return nil, fmt.Errorf("no model loaded")
	}
	if p[0] == profStart {
		w.cur.r.startProfile(w.mesh)
		return []byte{kindOK}, nil
	}
	rp, err := w.cur.r.stopProfile(w.cur.key.rank, w.mesh)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(&rp)
	if err != nil {
		return nil, err
	}
	return append([]byte{kindOK}, b...), nil
}
