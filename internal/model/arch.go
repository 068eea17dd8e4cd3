package model

import (
	"fmt"

	"braid/internal/kernels"
	"braid/internal/kvcache"
)

// family is one architecture family, registered by its GGUF architecture
// name from its own arch_*.go file.
type family struct {
	name string
	// config reads the family's own keys into c (the common ones are read
	// already) and sets its per-layer kinds; it may record missing required
	// keys in r instead of failing.
	config func(r *meta, c *Config) error
	// layer binds layer l (a global index) from the blocks, by GGUF name.
	layer func(b *binder, l int) *Layer
}

// families is filled by the arch files' init functions.
var families = map[string]*family{}

func register(f *family) {
	if _, dup := families[f.name]; dup {
		panic("model: architecture " + f.name + " registered twice")
	}
	families[f.name] = f
}

// Layer is one decoder block as the families compose it: a pre-norm token
// mixer (attention) and a pre-norm feed-forward, each followed by the
// group's all-reduce of the rank's partial output and a residual add:
//
//	x += allreduce(Mix(rms(x) * AttnNorm))
//	x += allreduce(FFN(rms(x) * FFNNorm))
type Layer struct {
	AttnNorm []float32
	Mix      Mixer
	FFNNorm  []float32
	FFN      FFN
}

// Mixer is a token-mixing block (attention of some kind). It reads the
// normalised hidden states h [n x embd] of the step's tokens and writes this
// rank's partial sum of the block's output into out [n x embd]; the layer
// all-reduces it. A rank holding no share of the block writes zeros.
type Mixer interface {
	mix(m *Model, cache *kvcache.Cache, b *Batch, l int, h, out []float32)
}

// FFN is a feed-forward block: like a Mixer, but per token.
type FFN interface {
	ffn(m *Model, h, out []float32, n int)
}

// layer runs transformer block l (a global index) over the step's n tokens
// in m.s.x. Each collective runs on every rank, also on a rank whose slice of
// that part is empty: the group's all-reduces pair up in order.
func (m *Model) layer(cache *kvcache.Cache, b *Batch, l int) error {
	return m.runLayer(cache, b, l, m.w.layers[l-m.sh.First])
}

// runLayer runs the blocks of w as layer l (its cache layer l-m.sh.First).
func (m *Model) runLayer(cache *kvcache.Cache, b *Batch, l int, w *Layer) error {
	c, s := &m.Cfg, &m.s
	n, E := len(b.Tokens), c.Embd
	for i := 0; i < n; i++ {
		kernels.RMSNorm(s.h[i*E:(i+1)*E], s.x[i*E:(i+1)*E], w.AttnNorm, c.NormEps)
	}
	w.Mix.mix(m, cache, b, l, s.h[:n*E], s.tmp[:n*E])
	if err := m.comm.AllReduceSum(s.tmp[:n*E]); err != nil {
		return fmt.Errorf("model: layer %d attention all-reduce: %w", l, err)
	}
	kernels.Add(s.x[:n*E], s.tmp[:n*E])

	for i := 0; i < n; i++ {
		kernels.RMSNorm(s.h[i*E:(i+1)*E], s.x[i*E:(i+1)*E], w.FFNNorm, c.NormEps)
	}
	w.FFN.ffn(m, s.h[:n*E], s.tmp[:n*E], n)
	if err := m.comm.AllReduceSum(s.tmp[:n*E]); err != nil {
		return fmt.Errorf("model: layer %d FFN all-reduce: %w", l, err)
	}
	kernels.Add(s.x[:n*E], s.tmp[:n*E])
	return nil
}
