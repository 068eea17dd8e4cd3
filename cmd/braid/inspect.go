package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"

	"braid/internal/gguf"
	"braid/internal/model"
	"braid/internal/quant"
	"braid/internal/sysinfo"
)

func init() {
	register("inspect", "show a GGUF model's metadata, tensors and memory needs; dump a tensor", runInspect)
}

func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inspect", "MODEL.gguf | -m MODEL [--tensor NAME --out FILE] [-c CTX]", stderr)
	model := fs.String("m", "", "model file (or give it as the argument), or ORG/NAME[:QUANT] from the Hugging Face hub cache")
	tensor := fs.String("tensor", "", "dequantize this tensor to little-endian float32, row-major")
	out := fs.String("out", "", "file to write the --tensor values to")
	ctx := fs.Int("c", 0, "context length for the memory estimate (default: the model's, at most 4096)")
	pull := pullFlag(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *model != "" {
		pos = append([]string{*model}, pos...)
	}
	if len(pos) != 1 {
		return usagef("want exactly one model file (-m MODEL or the argument), got %d", len(pos))
	}
	if (*tensor == "") != (*out == "") {
		return usagef("--tensor and --out go together")
	}
	if _, err := resolveModel(&pos[0], *pull, stderr); err != nil {
		return err
	}
	m, err := gguf.Open(pos[0])
	if err != nil {
		return err
	}
	defer m.Close()
	if *tensor != "" {
		return dumpTensor(m, *tensor, *out, stdout)
	}
	return describeModel(m, *ctx, stdout)
}

// dumpTensor writes one tensor dequantized, a row at a time so a large tensor
// never needs a float32 copy of itself in memory.
func dumpTensor(m *gguf.Model, name, path string, stdout io.Writer) error {
	t, ok := m.Tensor(name)
	if !ok {
		return fmt.Errorf("no tensor %q in %s (braid inspect lists them)", name, m.Files[0].Path)
	}
	cols, rows := int(t.Cols()), int(t.Rows())
	rowBytes, err := t.Type.RowBytes(int64(cols))
	if err != nil {
		return fmt.Errorf("tensor %q: %w", name, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	vals := make([]float32, cols)
	buf := make([]byte, 4*cols)
	for r := 0; r < rows; r++ {
		row := t.Data[int64(r)*rowBytes : int64(r+1)*rowBytes]
		if err := quant.Dequantize(t.Type, row, vals); err != nil {
			f.Close()
			return fmt.Errorf("tensor %q row %d: %w", name, r, err)
		}
		for i, v := range vals {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		if _, err := w.Write(buf); err != nil {
			f.Close()
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Fprintf(stdout, "wrote %s: %s %s -> %d float32 values (%d rows x %d cols)\n",
		path, name, t.Type, int64(rows)*int64(cols), rows, cols)
	return nil
}

func describeModel(m *gguf.Model, ctx int, w io.Writer) error {
	f0 := m.Files[0]
	arch := m.Arch()
	fmt.Fprintf(w, "file:         %s", f0.Path)
	if len(m.Files) > 1 {
		fmt.Fprintf(w, " (+%d more parts)", len(m.Files)-1)
	}
	fmt.Fprintf(w, "\nformat:       GGUF v%d, alignment %d\n", f0.Version, f0.Alignment)
	if arch == "" {
		arch = "(none: general.architecture missing)"
	}
	fmt.Fprintf(w, "architecture: %s\n", arch)

	fmt.Fprintf(w, "\nmetadata (%d keys):\n", len(m.KVs()))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, kv := range m.KVs() {
		fmt.Fprintf(tw, "  %s\t%s\n", kv.Key, kv.Value.String())
	}
	tw.Flush()

	type total struct {
		n      int
		params int64
		bytes  int64
	}
	byType := map[quant.Type]*total{}
	var all total
	fmt.Fprintf(w, "\ntensors (%d):\n", len(m.Tensors))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  name\ttype\tshape\tbytes")
	for _, t := range m.Tensors {
		dims := make([]string, len(t.Shape))
		for i, d := range t.Shape {
			dims[i] = fmt.Sprint(d)
		}
		fmt.Fprintf(tw, "  %s\t%s\t[%s]\t%d\n", t.Name, t.Type, strings.Join(dims, ", "), t.Size)
		tt := byType[t.Type]
		if tt == nil {
			tt = &total{}
			byType[t.Type] = tt
		}
		for _, x := range []*total{tt, &all} {
			x.n++
			x.params += t.Elements()
			x.bytes += t.Size
		}
	}
	tw.Flush()

	fmt.Fprintln(w, "\ntotals by type:")
	types := make([]quant.Type, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return byType[types[i]].bytes > byType[types[j]].bytes })
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  type\ttensors\tparameters\tbytes")
	for _, t := range types {
		x := byType[t]
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\n", t, x.n, x.params, sysinfo.FormatBytes(uint64(x.bytes)))
	}
	fmt.Fprintf(tw, "  all\t%d\t%d\t%s\n", all.n, all.params, sysinfo.FormatBytes(uint64(all.bytes)))
	tw.Flush()

	est := estimateMemory(m, ctx)
	fmt.Fprintf(w, "\nsingle-node load at context %d (KV cache F16):\n", est.ctx)
	fmt.Fprintf(w, "  weights   %s\n", est.weightsText())
	fmt.Fprintf(w, "  KV cache  %s\n", sysinfo.FormatBytes(uint64(est.kv)))
	fmt.Fprintf(w, "  scratch   %s (batch of %d tokens)\n", sysinfo.FormatBytes(uint64(est.scratch)), est.batch)
	if est.repack > 0 {
		how := "in place of the mapped pages it is copied from"
		if est.resident > 0 {
			how = "new memory: the file stays on tmpfs"
		}
		fmt.Fprintf(w, "  repacked  %s of the weights for this CPU's kernels at load (%s; --load-mode read keeps the file's copy too)\n", sysinfo.FormatBytes(uint64(est.repack)), how)
	}
	fmt.Fprintf(w, "  total     %s\n", sysinfo.FormatBytes(uint64(est.total())))
	if _, err := model.ReadConfig(m); err != nil {
		// Sizes alone say nothing of a model braid cannot run.
		fmt.Fprintf(w, "  braid cannot run it: %v\n", err)
	} else if mem, err := sysinfo.ReadMemory(); err == nil && mem.Usable() > 0 {
		verdict := "fits"
		if uint64(est.total()) > mem.Usable() {
			verdict = "does NOT fit"
		}
		fmt.Fprintf(w, "  this node %s usable: %s\n", sysinfo.FormatBytes(mem.Usable()), verdict)
	}
	return nil
}

// memEstimate is what loading a model on one node takes.
type memEstimate struct {
	ctx, batch           int
	weights, kv, scratch int64
	// resident is the part of the weights already in memory: a model file
	// on tmpfs is mapped, not copied, and its pages are not in
	// MemAvailable, so counting them again would refuse a model that fits.
	resident int64
	// repack is the part of the weights repacked at load into new memory
	// (plan.LoadFacts.Repack).
	repack int64
}

func (e memEstimate) total() int64 {
	t := e.weights - e.resident + e.kv + e.scratch
	if e.resident > 0 {
		// A file in memory stays there; the repacked copies are new.
		t += e.repack
	}
	return t
}

// weightsText is the weights' size for messages, saying when they are
// already in memory.
func (e memEstimate) weightsText() string {
	if e.resident > 0 {
		return sysinfo.FormatBytes(uint64(e.weights)) + ", already in memory (the file is on tmpfs)"
	}
	return sysinfo.FormatBytes(uint64(e.weights))
}

// estimateMemory sizes a single-node load from the architecture's hyper-
// parameters: the weights as stored, an F16 K and V row per layer and
// position, and float32 activations for one prefill batch. Models without
// the usual keys get a weights-only estimate.
func estimateMemory(m *gguf.Model, ctx int) (e memEstimate) {
	e = memEstimate{ctx: ctx, batch: 512, weights: m.Size()}
	defer func() {
		if len(m.Files) > 0 && sysinfo.InMemoryFS(m.Files[0].Path) {
			e.resident = e.weights
		}
	}()
	arch := m.Arch()
	hp := func(key string) int64 {
		v, _ := m.Int(arch + "." + key)
		return v
	}
	if ctx <= 0 {
		e.ctx = int(min(max(hp("context_length"), 0), 4096))
		if e.ctx == 0 {
			e.ctx = 4096
		}
	}
	layers, embd, ff := hp("block_count"), hp("embedding_length"), hp("feed_forward_length")
	heads, kvHeads := hp("attention.head_count"), hp("attention.head_count_kv")
	if kvHeads == 0 {
		kvHeads = heads
	}
	if layers == 0 || embd == 0 || heads == 0 {
		return e
	}
	if c, err := model.ReadConfig(m); err == nil {
		// A supported architecture: the model layer's own sizes (sliding
		// windows, latent rows, recurrent state, what the rank binds).
		full := model.FullShard(c)
		if w, err := model.WeightBytes(m, c, &full); err == nil {
			e.weights = w
		}
		if r, err := model.RepackBytes(m, c, &full); err == nil {
			e.repack = r
		}
		e.kv = model.KVBytes(model.CacheConfig(c, &full, model.CacheSize{Positions: e.ctx, Ctx: e.ctx, MaxStep: e.batch}))
		e.scratch = model.ScratchBytes(c, &full, e.batch, runtime.NumCPU(), e.ctx)
		return e
	}
	keyLen, valLen := hp("attention.key_length"), hp("attention.value_length")
	if keyLen == 0 {
		keyLen = embd / heads
	}
	if valLen == 0 {
		valLen = keyLen
	}
	e.kv = 2 * layers * int64(e.ctx) * kvHeads * (keyLen + valLen)
	vocab := int64(0)
	if toks, ok := m.Strings("tokenizer.ggml.tokens"); ok {
		vocab = int64(len(toks))
	}
	b := int64(e.batch)
	e.scratch = 4*b*(4*embd+2*ff+heads*keyLen+2*kvHeads*keyLen) + 4*b*int64(e.ctx) + 4*vocab
	return e
}
