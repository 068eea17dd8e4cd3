package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/quant"
)

// Shard files hold one rank's slices of a model: `braid split` writes one
// per rank, and a worker that receives its slices from the coordinator
// caches them as one. A shard file is a GGUF with the source model's
// metadata and its whole tensor directory, so that it binds exactly as the
// model does (the same names, shapes and offsets within each tensor), but
// only the bytes of the rank's slices are written: the rest of each tensor
// is a hole of the sparse file, taking no disk space and, as the binder
// never reads it, no memory. Metadata keys under braid.shard. say which
// model and which shard it is, so a worker recognises it under
// --models-dir. (Copying a shard file keeps it small only with a
// sparse-aware copy: cp --sparse=always, rsync -S, tar -S.)
const (
	keyShardSource = "braid.shard.source_sha256"
	keyShardName   = "braid.shard.source_name"
	keyShardSpec   = "braid.shard.shard" // JSON of the model.Shard
	keyShardRank   = "braid.shard.rank"
	keyShardWorld  = "braid.shard.world"
	keyShardSplit  = "braid.shard.split"
	keyShardBytes  = "braid.shard.bytes"
)

// piece is the bytes of one tensor that a shard reads: Count runs of Len
// bytes, Stride apart, the first at byte Off of the tensor's data (rows of
// a column-parallel weight are one run; the columns of a row-parallel one
// are a run per row).
type piece struct {
	Tensor int   `json:"t"`
	Off    int64 `json:"o"`
	Len    int64 `json:"n"`
	Stride int64 `json:"s"`
	Count  int64 `json:"c"`
}

func (p piece) bytes() int64 { return p.Len * p.Count }

// shardMeta says which shard of which model a shard file holds.
type shardMeta struct {
	SHA256 string
	Name   string
	Shard  model.Shard
	Rank   int
	World  int
	Split  string
	// Layout is the layout the Packed tensors' bound slices are written
	// in (braid split --layout); Plain: the model's.
	Layout kernels.Layout
	Packed []string
}

// shardSpec is the canonical text of a shard (without its notes): equal
// specs read equal slices.
func shardSpec(sh model.Shard) string {
	sh.Notes = nil
	b, _ := json.Marshal(sh)
	return string(b)
}

var blkName = regexp.MustCompile(`^blk\.(\d+)\.(.+)$`)

// shardPieces lists the bytes of each tensor that shard sh of a model with
// configuration c reads (internal/model's binder reads no others): whole
// tensors of its layers except the split matrices, which contribute their
// rows (Q, K, V, gate, up, the output head) or columns (attn_output,
// ffn_down); the embedding on the first stage; the head and final norm on
// the last. A tensor the list does not know is taken whole, which is never
// wrong, only larger.
func shardPieces(tensors []gguf.TensorInfo, c *model.Config, sh *model.Shard) ([]piece, error) {
	hd := c.HeadDim
	tied := true
	for i := range tensors {
		if tensors[i].Name == "output.weight" {
			tied = false
		}
	}
	var out []piece
	var err error
	for i := range tensors {
		t := &tensors[i]
		rb, rerr := t.Type.RowBytes(t.Cols())
		if rerr != nil {
			return nil, fmt.Errorf("tensor %s: %w", t.Name, rerr)
		}
		whole := func() { out = append(out, piece{Tensor: i, Len: t.Size, Stride: t.Size, Count: 1}) }
		// rows takes rows [r0, r1) of every matrix of the tensor (one per
		// expert for a 3D tensor).
		rows := func(r0, r1 int) {
			if r1 <= r0 {
				return
			}
			per := t.Shape[1] * rb
			if int64(r1) > t.Shape[1] {
				err = fmt.Errorf("tensor %s has %d rows, the shard reads up to %d", t.Name, t.Shape[1], r1)
				return
			}
			out = append(out, piece{Tensor: i, Off: int64(r0) * rb, Len: int64(r1-r0) * rb, Stride: per, Count: t.Size / per})
		}
		// cols takes columns [c0, c1) of every row.
		cols := func(c0, c1 int) {
			if c1 <= c0 {
				return
			}
			if c0 == 0 && int64(c1) == t.Cols() {
				whole()
				return
			}
			lo, e1 := t.Type.RowBytes(int64(c0))
			hi, e2 := t.Type.RowBytes(int64(c1))
			if e := errors.Join(e1, e2); e != nil || int64(c1) > t.Cols() {
				err = fmt.Errorf("tensor %s: columns [%d,%d) of %d: %v", t.Name, c0, c1, t.Cols(), e)
				return
			}
			out = append(out, piece{Tensor: i, Off: lo, Len: hi - lo, Stride: rb, Count: t.Rows()})
		}
		if m := blkName.FindStringSubmatch(t.Name); m != nil {
			l, _ := strconv.Atoi(m[1])
			if l < sh.First || l >= sh.Last {
				continue
			}
			if len(t.Shape) < 2 {
				whole()
				continue
			}
			switch m[2] {
			case "attn_q.weight":
				qd := hd
				if c.MLA != nil {
					qd = c.MLA.Nope + c.MLA.Rope
				}
				rows(sh.HeadLo*qd, sh.HeadHi*qd)
			case "attn_k.weight", "attn_v.weight":
				rows(sh.KVLo*hd, sh.KVHi*hd)
			case "attn_output.weight":
				od := c.AttnOutDim()
				cols(sh.HeadLo*od, sh.HeadHi*od)
			case "attn_q_b.weight":
				if c.MLA != nil {
					qk := c.MLA.Nope + c.MLA.Rope
					rows(sh.HeadLo*qk, sh.HeadHi*qk)
				} else {
					whole()
				}
			case "ffn_gate.weight", "ffn_up.weight":
				rows(sh.FFLo, sh.FFHi)
			case "ffn_down.weight":
				cols(sh.FFLo, sh.FFHi)
			case "ffn_gate_exps.weight", "ffn_up_exps.weight":
				rows(sh.ExpFFLo, sh.ExpFFHi)
			case "ffn_down_exps.weight":
				cols(sh.ExpFFLo, sh.ExpFFHi)
			case "ssm_out.weight":
				if a := c.SSM; a != nil {
					cols(sh.SSMLo*a.State, sh.SSMHi*a.State)
				} else {
					whole()
				}
			case "ffn_gate_shexp.weight", "ffn_up_shexp.weight":
				rows(sh.SharedFF(c))
			case "ffn_down_shexp.weight":
				cols(sh.SharedFF(c))
			default:
				whole()
			}
		} else {
			switch t.Name {
			case "token_embd.weight":
				if sh.FirstStage() {
					whole()
				} else if tied && sh.LastStage(c) && len(t.Shape) == 2 {
					rows(sh.VocabLo, sh.VocabHi)
				}
			case "output.weight":
				if sh.LastStage(c) && len(t.Shape) == 2 {
					rows(sh.VocabLo, sh.VocabHi)
				}
			case "output_norm.weight":
				if sh.LastStage(c) {
					whole()
				}
			default:
				whole()
			}
		}
		if err != nil {
			return nil, err
		}
	}
	for _, p := range out {
		t := &tensors[p.Tensor]
		if p.Off < 0 || p.Len < 0 || p.Count < 1 || p.Off+(p.Count-1)*p.Stride+p.Len > t.Size {
			return nil, fmt.Errorf("tensor %s: slice of %d runs of %d bytes from %d, %d apart, does not fit its %d bytes", t.Name, p.Count, p.Len, p.Off, p.Stride, t.Size)
		}
	}
	return out, nil
}

// piecesBytes is the total size of the pieces.
func piecesBytes(ps []piece) int64 {
	var n int64
	for _, p := range ps {
		n += p.bytes()
	}
	return n
}

// holeWriter writes a file sequentially, leaving every all-zero 64 KiB
// block as a hole: the shard's skeleton (header, then zeros for every
// tensor) costs only its header on disk.
type holeWriter struct {
	f   *os.File
	off int64
}

var zeroBlock = make([]byte, 64<<10)

func (h *holeWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), len(zeroBlock))
		if !bytes.Equal(p[:k], zeroBlock[:k]) {
			if _, err := h.f.WriteAt(p[:k], h.off); err != nil {
				return n - len(p), err
			}
		}
		h.off += int64(k)
		p = p[k:]
	}
	return n, nil
}

// shardWriter fills the pieces of a shard file being written.
type shardWriter struct {
	f      *os.File
	pieces []piece
	starts []int64 // file offset of each piece's tensor data
}

// putTensor writes b at byte off of tensor ti's data, which must lie in
// one run of one of the shard's pieces: a repacked slice replaces the
// bytes its plain slice was written to.
func (s *shardWriter) putTensor(ti int, off int64, b []byte) error {
	for i, p := range s.pieces {
		if p.Tensor != ti || off < p.Off {
			continue
		}
		run, in := (off-p.Off)/p.Stride, (off-p.Off)%p.Stride
		if run < p.Count && in+int64(len(b)) <= p.Len {
			return s.put(i, run*p.Len+in, b)
		}
	}
	return fmt.Errorf("bytes [%d,%d) of tensor %d are in none of the shard's slices", off, off+int64(len(b)), ti)
}

// put writes b at byte off of piece i's bytes (its runs concatenated).
func (s *shardWriter) put(i int, off int64, b []byte) error {
	if i < 0 || i >= len(s.pieces) {
		return fmt.Errorf("piece %d of %d", i, len(s.pieces))
	}
	p := s.pieces[i]
	if off < 0 || off+int64(len(b)) > p.bytes() {
		return fmt.Errorf("bytes [%d,%d) outside piece %d of %d bytes", off, off+int64(len(b)), i, p.bytes())
	}
	for len(b) > 0 {
		run, in := off/p.Len, off%p.Len
		k := min(int64(len(b)), p.Len-in)
		if _, err := s.f.WriteAt(b[:k], s.starts[i]+p.Off+run*p.Stride+in); err != nil {
			return err
		}
		b, off = b[k:], off+k
	}
	return nil
}

// writeShardFile writes a shard file at path (atomically: a temporary file
// renamed when complete): the metadata kvs and the tensor directory of the
// source model with the braid.shard keys, and the pieces, which fill writes
// through its shardWriter.
func writeShardFile(path string, kvs []gguf.KV, tensors []gguf.TensorInfo, meta shardMeta, pieces []piece, fill func(sw *shardWriter) error) (err error) {
	w := gguf.NewWriter()
	for _, kv := range kvs {
		if len(kv.Key) > 12 && kv.Key[:12] == "braid.shard." {
			continue
		}
		w.Set(kv.Key, kv.Value)
	}
	w.Set(keyShardSource, gguf.String(meta.SHA256))
	w.Set(keyShardName, gguf.String(meta.Name))
	w.Set(keyShardSpec, gguf.String(shardSpec(meta.Shard)))
	w.Set(keyShardRank, gguf.Uint32(uint32(meta.Rank)))
	w.Set(keyShardWorld, gguf.Uint32(uint32(meta.World)))
	w.Set(keyShardSplit, gguf.String(meta.Split))
	w.Set(keyShardBytes, gguf.Uint64(uint64(piecesBytes(pieces))))
	if meta.Layout != kernels.Plain {
		w.Set(model.KeyShardLayout, gguf.String(meta.Layout.Versioned()))
		w.Set(model.KeyShardPacked, gguf.StringArray(meta.Packed))
	}
	var biggest int64
	for _, t := range tensors {
		biggest = max(biggest, t.Size)
	}
	zeros, release, err := zeroMapping(biggest)
	if err != nil {
		return err
	}
	defer release()
	for _, t := range tensors {
		if err := w.AddTensor(t.Name, t.Type, t.Shape, zeros[:t.Size]); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	hw := &holeWriter{f: f}
	n, err := w.WriteTo(hw)
	if err != nil {
		return fmt.Errorf("writing the shard file's directory: %w", err)
	}
	if err := f.Truncate(n); err != nil {
		return err
	}
	// The offsets the writer chose, read back as any reader would.
	hdr, err := gguf.Open(f.Name())
	if err != nil {
		return fmt.Errorf("reading back the shard file's directory: %w", err)
	}
	byName := map[string]int64{}
	for _, t := range hdr.Files[0].Tensors {
		byName[t.Name] = hdr.Files[0].DataOffset + t.Offset
	}
	hdr.Close()
	sw := &shardWriter{f: f, pieces: pieces}
	for _, p := range pieces {
		if p.Tensor < 0 || p.Tensor >= len(tensors) {
			return fmt.Errorf("piece of tensor %d of %d", p.Tensor, len(tensors))
		}
		sw.starts = append(sw.starts, byName[tensors[p.Tensor].Name])
	}
	if err := fill(sw); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		f = nil
		os.Remove(name)
		return err
	}
	f = nil
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}

// copyPieces fills a shard file from the source model's mapped data, then
// writes the linear layers of packs repacked over their plain bytes.
func copyPieces(src *gguf.Model, tensors []gguf.TensorInfo, pieces []piece, packs []model.PackedLinear, l kernels.Layout) func(sw *shardWriter) error {
	return func(sw *shardWriter) error {
		put := sw.put
		for i, p := range pieces {
			t, ok := src.Tensor(tensors[p.Tensor].Name)
			if !ok {
				return fmt.Errorf("tensor %s is missing", tensors[p.Tensor].Name)
			}
			var off int64
			for r := int64(0); r < p.Count; r++ {
				b := t.Data[p.Off+r*p.Stride : p.Off+r*p.Stride+p.Len]
				if err := put(i, off, b); err != nil {
					return err
				}
				off += p.Len
			}
		}
		index := map[string]int{}
		for i, t := range tensors {
			index[t.Name] = i
		}
		for _, pl := range packs {
			t, ok := src.Tensor(pl.Tensor)
			ti, ok2 := index[pl.Tensor]
			if !ok || !ok2 {
				return fmt.Errorf("tensor %s is missing", pl.Tensor)
			}
			if pl.Off < 0 || pl.Count < 1 || pl.Len < 0 || pl.Off+(pl.Count-1)*pl.Stride+pl.Len > int64(len(t.Data)) {
				return fmt.Errorf("tensor %s: %d runs of %d bytes from %d, %d apart, outside its %d bytes", pl.Tensor, pl.Count, pl.Len, pl.Off, pl.Stride, len(t.Data))
			}
			m := pl.Matrix
			m.Data = make([]byte, pl.Len*pl.Count)
			for k := int64(0); k < pl.Count; k++ {
				o := pl.Off + k*pl.Stride
				copy(m.Data[k*pl.Len:], t.Data[o:o+pl.Len])
			}
			pm, ok := kernels.Repack(m, l)
			if !ok || len(pm.Data) != len(m.Data) {
				return fmt.Errorf("tensor %s: a %dx%d %s slice does not repack to %s", pl.Tensor, m.Rows, m.Cols, m.Type, l)
			}
			for k := int64(0); k < pl.Count; k++ {
				if err := sw.putTensor(ti, pl.Off+k*pl.Stride, pm.Data[k*pl.Len:(k+1)*pl.Len]); err != nil {
					return fmt.Errorf("tensor %s: %w", pl.Tensor, err)
				}
			}
		}
		return nil
	}
}

// tensorInfos are the model's tensors in directory order.
func tensorInfos(m *gguf.Model) []gguf.TensorInfo {
	out := make([]gguf.TensorInfo, len(m.Tensors))
	for i, t := range m.Tensors {
		out[i] = t.TensorInfo
	}
	return out
}

// WriteShards writes one shard file per rank of plan p of the model at
// src (whose SHA-256 is sha) into dir and returns their paths, in rank
// order. A worker given dir as --models-dir loads its shard from there.
// With layout X8 the linear layers that have it are written in it (see
// model.PackPlan): a node whose kernels take that layout binds them as
// they are, and one whose kernels do not refuses the file.
// With only set, only the types it accepts are.
func WriteShards(src *gguf.Model, sha string, shards []model.Shard, split, dir string, layout kernels.Layout, only func(quant.Type) bool, progress io.Writer) ([]string, error) {
	c, err := model.ReadConfig(src)
	if err != nil {
		return nil, err
	}
	tensors := tensorInfos(src)
	base := filepath.Base(src.Files[0].Path)
	stem := base[:len(base)-len(filepath.Ext(base))]
	var paths []string
	for r := range shards {
		sh := shards[r]
		sh.Notes = nil
		pieces, err := shardPieces(tensors, c, &sh)
		if err != nil {
			return nil, fmt.Errorf("rank %d: %w", r, err)
		}
		path := filepath.Join(dir, fmt.Sprintf("%s.rank%dof%d.gguf", stem, r, len(shards)))
		meta := shardMeta{SHA256: sha, Name: base, Shard: sh, Rank: r, World: len(shards), Split: split}
		var packs []model.PackedLinear
		var packed int64
		if layout != kernels.Plain {
			if packs, err = model.PackPlan(src, c, &sh, layout, only); err != nil {
				return nil, fmt.Errorf("rank %d: %w", r, err)
			}
			seen := map[string]bool{}
			for _, p := range packs {
				packed += p.Len * p.Count
				if !seen[p.Tensor] {
					seen[p.Tensor] = true
					meta.Packed = append(meta.Packed, p.Tensor)
				}
			}
			if len(packs) > 0 {
				meta.Layout = layout
			}
		}
		if err := writeShardFile(path, src.KVs(), tensors, meta, pieces, copyPieces(src, tensors, pieces, packs, layout)); err != nil {
			return nil, fmt.Errorf("rank %d: %w", r, err)
		}
		if progress != nil {
			lay := ""
			if meta.Layout != kernels.Plain {
				lay = fmt.Sprintf(", %d matrices of %d tensors (%s) in the %s layout", len(packs), len(meta.Packed), formatBytes(packed), meta.Layout.Versioned())
			}
			fmt.Fprintf(progress, "braid: rank %d: %s (%s of slices, %s%s)\n", r, path, formatBytes(piecesBytes(pieces)), sh.String(), lay)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}

// readShardMeta reads a shard file's braid.shard keys; ok is false when the
// file is not a shard file.
func readShardMeta(m *gguf.Model) (sha, spec string, ok bool) {
	sha, ok1 := m.String(keyShardSource)
	spec, ok2 := m.String(keyShardSpec)
	return sha, spec, ok1 && ok2
}
