package model

import (
	"fmt"
	"sort"
	"strings"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/quant"
)

// Keys of a shard file written repacked (braid split --layout): the
// layout's versioned name (kernels.Layout.Versioned) and the tensors whose
// bound slices are held in it. A file without them holds the model's
// layout.
const (
	KeyShardLayout = "braid.shard.layout"
	KeyShardPacked = "braid.shard.packed"
)

// A PackedLinear is one linear layer a shard binds that a shard file can
// hold repacked: its tensor, where its bytes lie in the tensor (Count runs
// of Len bytes, Stride apart, from Off, concatenated in that order), and
// its matrix (type and shape; no data).
type PackedLinear struct {
	Tensor                  string
	Off, Len, Stride, Count int64
	Matrix                  kernels.Matrix
}

// PackPlan lists the linear layers of shard sh that a shard file can hold
// in layout l, in binding order: those of a type with the layout, with a
// group of rows, whose tensor is read in no other way (a tied head's
// embedding is also looked up by token, so it stays in the file's layout
// and is repacked at load), and whose bound bytes no other binding of the
// same tensor overlaps; with only set, of the types it accepts. The MTP
// head's layers are included: a worker may load it.
func PackPlan(f *gguf.Model, c *Config, sh *Shard, l kernels.Layout, only func(quant.Type) bool) ([]PackedLinear, error) {
	if err := sh.Validate(c); err != nil {
		return nil, err
	}
	cc := *c
	var all []PackedLinear
	bad := map[string]bool{}
	trace := func(src linearSrc, m kernels.Matrix) {
		if !kernels.Packable(m, l) || (only != nil && !only(m.Type)) {
			bad[src.Tensor] = true
			return
		}
		m.Data = nil
		all = append(all, PackedLinear{Tensor: src.Tensor, Off: src.Off, Len: src.Len, Stride: src.Stride, Count: src.Count, Matrix: m})
	}
	raw := map[string]bool{}
	if _, _, err := bindWeightsWith(f, &cc, sh, true, true, func(b *binder) { b.trace, b.raw = trace, raw }); err != nil {
		return nil, err
	}
	var out []PackedLinear
	byTensor := map[string][]PackedLinear{}
	for _, p := range all {
		if bad[p.Tensor] || raw[p.Tensor] {
			continue
		}
		dup := false
		for _, q := range byTensor[p.Tensor] {
			if q.Off == p.Off && q.Len == p.Len && q.Stride == p.Stride && q.Count == p.Count {
				dup = true // the MTP head's copy of the output head
				break
			}
			if p.Off < q.end() && q.Off < p.end() {
				bad[p.Tensor] = true
			}
		}
		if !dup {
			byTensor[p.Tensor] = append(byTensor[p.Tensor], p)
			out = append(out, p)
		}
	}
	kept := out[:0]
	for _, p := range out {
		if !bad[p.Tensor] {
			kept = append(kept, p)
		}
	}
	return kept, nil
}

// end is one past the last byte of p's runs.
func (p PackedLinear) end() int64 { return p.Off + (p.Count-1)*p.Stride + p.Len }

// ShardLayout reads the repacked layout of a shard file written by braid
// split --layout and the tensors held in it, and refuses a file this
// node's kernels cannot read: another version of the layout, or a weight
// type this CPU's kernels (its features, BRAID_REPACK, BRAID_KERNELS) take
// in another layout. A file in the model's layout gives Plain and no
// tensors.
func ShardLayout(f *gguf.Model) (kernels.Layout, map[string]bool, error) {
	name, ok := f.String(KeyShardLayout)
	if !ok || name == "plain" {
		return kernels.Plain, nil, nil
	}
	path := f.Files[0].Path
	l, err := kernels.ParseLayout(name)
	if err != nil {
		return kernels.Plain, nil, fmt.Errorf("model: shard file %s was written repacked in the %s layout, which this build cannot read (%v): write it again with this build's braid split", path, name, err)
	}
	names, ok := f.Strings(KeyShardPacked)
	if !ok {
		return kernels.Plain, nil, fmt.Errorf("model: shard file %s says %s = %s but has no %s list", path, KeyShardLayout, name, KeyShardPacked)
	}
	packed := make(map[string]bool, len(names))
	types := map[quant.Type]bool{}
	for _, n := range names {
		t, ok := f.Tensor(n)
		if !ok {
			return kernels.Plain, nil, fmt.Errorf("model: shard file %s lists tensor %s as %s, but has no such tensor", path, n, name)
		}
		if !kernels.HasLayout(t.Type, l) {
			return kernels.Plain, nil, fmt.Errorf("model: shard file %s lists tensor %s (%s) as %s, which that type has no form of", path, n, t.Type, name)
		}
		packed[n] = true
		types[t.Type] = true
	}
	var want, other []string
	for t := range types {
		want = append(want, t.String())
		if kernels.LayoutFor(t) != l {
			other = append(other, fmt.Sprintf("%s in the %s layout", t, kernels.LayoutFor(t)))
		}
	}
	sort.Strings(want)
	sort.Strings(other)
	if len(other) > 0 {
		return kernels.Plain, nil, fmt.Errorf("model: shard file %s holds its %s weights in the %s layout (braid split --layout %s); this node's kernels take %s (this CPU's features, BRAID_REPACK and BRAID_KERNELS decide): write its shards again with braid split --layout plain, or on a node like this one",
			path, strings.Join(want, ", "), name, l, strings.Join(other, ", "))
	}
	return l, packed, nil
}
