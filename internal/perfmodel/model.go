// Package perfmodel predicts how fast a model runs on a set of nodes under
// each split braid offers, before anything is loaded: a cost per decode
// step and per prefill token built from the bytes each layer reads (its
// weights, by format, and its KV cache or recurrent state at a context),
// the node's kernel throughput per format and memory bandwidth, and the
// exchanges each split adds (tensor split: two all-reduces a layer; layer
// split: one hidden-state send per stage boundary, and its pipeline over
// concurrent streams).
//
// The model is a roofline with stated efficiency factors, not a fit: a
// step takes the longer of its bytes over the node's streaming rate and its
// arithmetic over the node's compute rate, plus its exchanges, each a
// latency and its bytes over the link's bandwidth. The rates of this node
// come from a short measurement (Calibrate); a hypothetical node's come
// from its spec (ParseNodes) and the preset's factors, which say where
// they come from.
package perfmodel

import (
	"fmt"
	"strings"

	"braid/internal/gguf"
	"braid/internal/model"
	"braid/internal/quant"
)

// Part is a group of weights of one format: the bytes a token reads and
// the parameters it multiplies (two flops each).
type Part struct {
	Type   quant.Type
	Bytes  int64
	Params int64
}

// Parts are weights of possibly several formats.
type Parts []Part

// Add adds a tensor of type t.
func (ps *Parts) Add(t quant.Type, bytes, params int64) {
	for i := range *ps {
		if (*ps)[i].Type == t {
			(*ps)[i].Bytes += bytes
			(*ps)[i].Params += params
			return
		}
	}
	*ps = append(*ps, Part{Type: t, Bytes: bytes, Params: params})
}

// Bytes is the parts' total bytes.
func (ps Parts) Bytes() int64 {
	var n int64
	for _, p := range ps {
		n += p.Bytes
	}
	return n
}

// Params is the parts' total parameters.
func (ps Parts) Params() int64 {
	var n int64
	for _, p := range ps {
		n += p.Params
	}
	return n
}

// scaled is ps times f (one expert of n, a rank's share).
func (ps Parts) scaled(f float64) Parts {
	out := make(Parts, len(ps))
	for i, p := range ps {
		out[i] = Part{Type: p.Type, Bytes: int64(float64(p.Bytes) * f), Params: int64(float64(p.Params) * f)}
	}
	return out
}

// Layer is what one block reads per token.
type Layer struct {
	// Mix is the attention (or DeltaNet) block's weights, with its norms
	// and, for DSA, the indexer's.
	Mix Parts
	// Dense is the dense FFN (nil on MoE layers); Shared the parts of a
	// MoE layer every token runs (router, shared experts); Expert one
	// routed expert, of Experts, Used per token.
	Dense, Shared, Expert Parts
	Experts, Used         int
	// KVPerPos is the cache bytes attention reads per context position
	// (keys and values, or MLA's latent row); Window limits the positions
	// (0: all). TopK, for DSA, is the most positions attention reads, and
	// IndexPerPos the indexer key bytes read at every position.
	KVPerPos, IndexPerPos int64
	Window, TopK          int
	// State is a DeltaNet layer's recurrent state bytes (read and written
	// each token).
	State int64
	// Latent: the cache is MLA's one latent row, which every rank of a
	// tensor split reads whole.
	Latent bool
	// Ops are the layer's operations besides its routed experts' products
	// (one per weight matrix, and the norms, rope, attention, activation
	// and residual adds): each costs the node's OpCost, the fixed price
	// of starting and joining the threads on a product, whatever its size.
	Ops int
	// AttnFlopsPerPos is the attention's arithmetic per token per context
	// position read (scores and the weighted sum).
	AttnFlopsPerPos int64
}

// Model is what the cost model needs of a model.
type Model struct {
	Name   string
	Embd   int
	Vocab  int
	Layers []Layer
	// Head is the output projection; Embed one row of the embedding is
	// read per token (negligible, counted for the first stage's memory).
	Head Parts
	// EmbedBytes is the whole token embedding (memory only).
	EmbedBytes int64
	// MTP is the NextN block with its head, per draft token (nil: none).
	MTP Parts
}

// WeightBytes is the whole model's weight bytes (memory at world 1).
func (m *Model) WeightBytes() int64 {
	n := m.EmbedBytes + m.Head.Bytes() + m.MTP.Bytes()
	for _, l := range m.Layers {
		n += l.Mix.Bytes() + l.Dense.Bytes() + l.Shared.Bytes() + int64(l.Experts)*l.Expert.Bytes()
	}
	return n
}

// ActiveParams is the parameters one token multiplies.
func (m *Model) ActiveParams() int64 {
	n := m.Head.Params()
	for _, l := range m.Layers {
		n += l.Mix.Params() + l.Dense.Params() + l.Shared.Params() + int64(l.Used)*l.Expert.Params()
	}
	return n
}

// cacheBytes is the KV per context position (with f16 elements) of
// layer l of c; window, topK and index follow Layer's fields.
func cacheGeometry(c *model.Config, l int) (kv, index int64, window, topK int, state int64, flops int64) {
	const el = 2 // f16 cache
	switch {
	case c.IsRecurrent(l) && c.SSM != nil:
		s := c.SSM
		state = int64(s.VHeads)*int64(s.State)*int64(s.State)*4 + int64(s.Conv-1)*int64(2*s.KHeads*s.State+s.VHeads*s.State)*4
		return 0, 0, 0, 0, state, 0
	case c.MLA != nil:
		m := c.MLA
		kv = int64(m.KVLora+m.Rope) * el
		// Absorbed MLA: scores over KVLora+Rope, sum over KVLora, per head.
		flops = 2 * int64(c.Heads) * int64(2*m.KVLora+m.Rope)
		if m.Indexer != nil && len(m.Indexer.Full) > l {
			topK = m.Indexer.TopK
			if m.Indexer.Full[l] {
				index = int64(m.Indexer.Dim) * el
				flops += 2 * int64(m.Indexer.Heads) * int64(m.Indexer.Dim)
			}
		}
	default:
		vd := c.ValueDim
		if vd == 0 {
			vd = c.HeadDim
		}
		kv = int64(c.KVHeads) * int64(c.HeadDim+vd) * el
		flops = 2 * int64(c.Heads) * int64(c.HeadDim+vd)
	}
	if l < len(c.Window) {
		window = c.Window[l]
	}
	return kv, index, window, topK, 0, flops
}

// FromGGUF builds the model from an open GGUF: every tensor's bytes and
// parameters, by class (its name), and the cache geometry from c.
func FromGGUF(f *gguf.Model, c *model.Config) (*Model, error) {
	m := &Model{Name: f.Arch(), Embd: c.Embd, Vocab: c.Vocab, Layers: make([]Layer, c.Layers)}
	if n, ok := f.String("general.name"); ok && n != "" {
		m.Name = n
	}
	var tiedEmbed *gguf.Tensor
	for _, t := range f.Tensors {
		name := t.Name
		params := t.Elements()
		switch {
		case name == "token_embd.weight":
			m.EmbedBytes += t.Size
			tiedEmbed = t
			continue
		case name == "output.weight":
			m.Head.Add(t.Type, t.Size, params)
			continue
		case !strings.HasPrefix(name, "blk."):
			// output_norm, rope factors: read once a step, tiny.
			continue
		}
		var l int
		if _, err := fmt.Sscanf(name, "blk.%d.", &l); err != nil {
			return nil, fmt.Errorf("perfmodel: tensor %q: no layer number", name)
		}
		if l >= c.Layers {
			m.MTP.Add(t.Type, t.Size, params)
			continue
		}
		ly := &m.Layers[l]
		if len(t.Shape) >= 2 && t.Shape[1] > 1 && !strings.Contains(name, "_exps") {
			ly.Ops++
		}
		switch {
		case strings.Contains(name, "_exps"):
			ly.Expert.Add(t.Type, t.Size/int64(max(c.Experts, 1)), params/int64(max(c.Experts, 1)))
		case strings.Contains(name, "_shexp") || strings.Contains(name, "ffn_gate_inp") || strings.Contains(name, "exp_probs"):
			ly.Shared.Add(t.Type, t.Size, params)
		case strings.HasPrefix(name[len(fmt.Sprintf("blk.%d.", l)):], "ffn_") && !strings.Contains(name, "norm"):
			ly.Dense.Add(t.Type, t.Size, params)
		default:
			ly.Mix.Add(t.Type, t.Size, params)
		}
	}
	if m.Head == nil && tiedEmbed != nil {
		m.Head.Add(tiedEmbed.Type, tiedEmbed.Size, tiedEmbed.Elements())
	}
	if m.MTP != nil {
		m.MTP = append(m.MTP, m.Head...)
	}
	for l := range m.Layers {
		ly := &m.Layers[l]
		if c.MoE(l) {
			ly.Experts, ly.Used = c.Experts, c.ExpertsUsed
		}
		ly.KVPerPos, ly.IndexPerPos, ly.Window, ly.TopK, ly.State, ly.AttnFlopsPerPos = cacheGeometry(c, l)
		ly.Latent = c.MLA != nil && !c.IsRecurrent(l)
		ly.Ops += 6 // two norms, rope, attention (or the recurrence), the activation, the adds
	}
	return m, nil
}
