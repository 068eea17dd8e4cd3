package modelgen

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"braid/internal/gguf"
	"braid/internal/quant"
	"braid/internal/sharedtest"
)

// tinyGPTOSS is the shape of the llama.cpp-made tiny gpt-oss model in the
// shared test data (see its README.md), as a Config.
var tinyGPTOSS = Config{Arch: "gpt-oss", Layers: 2, Embd: 256, FF: 32, Heads: 4, KVHeads: 1, HeadDim: 64, Vocab: 512,
	Context: 131072, Experts: 4, ExpertsUsed: 2, ExpertFF: 32, SlidingWindow: 16}

const sharedGPTOSS = "../../../shared/testdata/models/gpt-oss/"

func writeAndOpen(t *testing.T, c Config) *gguf.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := WriteFile(path, c); err != nil {
		t.Fatal(err)
	}
	m, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func withMix(t *testing.T, c Config, mix string) Config {
	t.Helper()
	typ, rule, err := Mix(mix)
	if err != nil {
		t.Fatal(err)
	}
	c.Type, c.TypeFor = typ, rule
	return c
}

// TestGPTOSSLayout checks a small gpt-oss model tensor by tensor: names in
// llama.cpp's order, ggml shapes, and the MXFP4_MOE types (experts MXFP4,
// other matrices Q8_0, the rest F32), and its metadata key by key.
func TestGPTOSSLayout(t *testing.T) {
	const (
		layers, embd, heads, kvHeads, hd, experts, used, eff, vocab = 2, 64, 4, 2, 16, 4, 2, 96, 300
		q, kv                                                       = heads * hd, kvHeads * hd
	)
	c := withMix(t, Config{Arch: "gpt-oss", Layers: layers, Embd: embd, FF: 32, Heads: heads, KVHeads: kvHeads, HeadDim: hd,
		Vocab: vocab, Experts: experts, ExpertsUsed: used, ExpertFF: eff, Seed: 4}, "MXFP4_MOE")
	m := writeAndOpen(t, c)

	type tensor struct {
		name  string
		typ   quant.Type
		shape []int64
	}
	f32, q8, mx := quant.F32, quant.Q8_0, quant.MXFP4
	want := []tensor{{"token_embd.weight", q8, []int64{embd, vocab}}}
	for l := 0; l < layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		want = append(want,
			tensor{p + "attn_norm.weight", f32, []int64{embd}},
			tensor{p + "attn_q.weight", q8, []int64{embd, q}},
			tensor{p + "attn_k.weight", q8, []int64{embd, kv}},
			tensor{p + "attn_v.weight", q8, []int64{embd, kv}},
			tensor{p + "attn_q.bias", f32, []int64{q}},
			tensor{p + "attn_k.bias", f32, []int64{kv}},
			tensor{p + "attn_v.bias", f32, []int64{kv}},
			tensor{p + "attn_output.weight", q8, []int64{q, embd}},
			tensor{p + "attn_output.bias", f32, []int64{embd}},
			tensor{p + "attn_sinks.weight", f32, []int64{heads}},
			tensor{p + "post_attention_norm.weight", f32, []int64{embd}},
			tensor{p + "ffn_gate_inp.weight", f32, []int64{embd, experts}},
			tensor{p + "ffn_gate_inp.bias", f32, []int64{experts}},
			tensor{p + "ffn_gate_exps.weight", mx, []int64{embd, eff, experts}},
			tensor{p + "ffn_up_exps.weight", mx, []int64{embd, eff, experts}},
			tensor{p + "ffn_down_exps.weight", mx, []int64{eff, embd, experts}},
			tensor{p + "ffn_gate_exps.bias", f32, []int64{eff, experts}},
			tensor{p + "ffn_up_exps.bias", f32, []int64{eff, experts}},
			tensor{p + "ffn_down_exps.bias", f32, []int64{embd, experts}},
		)
	}
	want = append(want, tensor{"output_norm.weight", f32, []int64{embd}}, tensor{"output.weight", q8, []int64{embd, vocab}})
	if len(m.Tensors) != len(want) {
		t.Errorf("%d tensors, want %d", len(m.Tensors), len(want))
	}
	for i, w := range want {
		if i >= len(m.Tensors) {
			break
		}
		g := m.Tensors[i]
		if g.Name != w.name || g.Type != w.typ || !slices.Equal(g.Shape, w.shape) {
			t.Errorf("tensor %d: %s %s %v, want %s %s %v", i, g.Name, g.Type, g.Shape, w.name, w.typ, w.shape)
		}
	}

	u := map[string]uint64{"context_length": 4096, "embedding_length": embd, "block_count": layers, "feed_forward_length": 32,
		"attention.head_count": heads, "attention.head_count_kv": kvHeads, "attention.key_length": hd,
		"attention.value_length": hd, "rope.dimension_count": hd, "expert_count": experts, "expert_used_count": used,
		"expert_feed_forward_length": eff, "vocab_size": vocab, "rope.scaling.original_context_length": 4096,
		"attention.sliding_window": 128}
	for k, v := range u {
		if got, ok := m.Uint("gpt-oss." + k); !ok || got != v {
			t.Errorf("gpt-oss.%s = %d (present %v), want %d", k, got, ok, v)
		}
	}
	fl := map[string]float64{"rope.freq_base": 150000, "attention.layer_norm_rms_epsilon": float64(float32(1e-5)),
		"rope.scaling.factor": 32, "rope.scaling.yarn_beta_fast": 32, "rope.scaling.yarn_beta_slow": 1}
	for k, v := range fl {
		if got, ok := m.Float("gpt-oss." + k); !ok || got != v {
			t.Errorf("gpt-oss.%s = %g (present %v), want %g", k, got, ok, v)
		}
	}
	if s, _ := m.String("gpt-oss.rope.scaling.type"); s != "yarn" {
		t.Errorf("gpt-oss.rope.scaling.type = %q, want yarn", s)
	}
	if toks, _ := m.Strings("tokenizer.ggml.tokens"); len(toks) != vocab {
		t.Errorf("%d tokens, want %d", len(toks), vocab)
	}

	// The values are the drawn ones: norms near 1, the rest centred on 0
	// with their spread, the expert matrices readable back from MXFP4.
	for _, tc := range []struct {
		name      string
		mean, std float64
	}{
		{"blk.1.post_attention_norm.weight", 1, 0.1},
		{"blk.0.attn_sinks.weight", 0, 1},
		{"blk.0.ffn_down_exps.bias", 0, 0.1},
		{"blk.1.ffn_up_exps.weight", 0, 1 / math.Sqrt(embd)},
		{"blk.1.ffn_down_exps.weight", 0, 1 / math.Sqrt(eff)},
	} {
		tt, _ := m.Tensor(tc.name)
		vals := make([]float32, tt.Elements())
		if err := quant.Dequantize(tt.Type, tt.Data, vals); err != nil {
			t.Fatal(err)
		}
		var s, ss float64
		for _, v := range vals {
			s += float64(v)
			ss += float64(v) * float64(v)
		}
		mean := s / float64(len(vals))
		std := math.Sqrt(ss/float64(len(vals)) - mean*mean)
		if math.Abs(mean-tc.mean) > 4*tc.std/math.Sqrt(float64(len(vals)))+1e-3 || math.Abs(std/tc.std-1) > 0.5 {
			t.Errorf("%s: mean %.4f std %.4f, want about %g and %g", tc.name, mean, std, tc.mean, tc.std)
		}
	}
}

// TestGPTOSSMatchesLlamaCpp: at the shape of the tiny gpt-oss model that
// llama.cpp converted, quantized and ran (shared test data), every
// gpt-oss.* key has the same type and value, and the tensors have the same
// names, shapes and, per file type, the same types as llama-quantize chose.
func TestGPTOSSMatchesLlamaCpp(t *testing.T) {
	for _, mix := range []string{"F32", "Q8_0", "MXFP4_MOE"} {
		t.Run(mix, func(t *testing.T) {
			ref, err := gguf.Open(sharedGPTOSS + "tiny-gpt-oss-" + mix + ".gguf")
			if errors.Is(err, fs.ErrNotExist) {
				sharedtest.Missing(t, "shared test data not available: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			m := writeAndOpen(t, withMix(t, tinyGPTOSS, mix))

			keys := func(m *gguf.Model) map[string]gguf.Value {
				out := map[string]gguf.Value{}
				for _, kv := range m.KVs() {
					if strings.HasPrefix(kv.Key, "gpt-oss.") {
						out[kv.Key] = kv.Value
					}
				}
				return out
			}
			got, want := keys(m), keys(ref)
			for k, v := range want {
				if g, ok := got[k]; !ok || !g.Equal(v) {
					t.Errorf("%s = %v (%v), llama.cpp's file has %v (%v)", k, g, g.Type(), v, v.Type())
				}
			}
			for k, v := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("%s = %v is not in llama.cpp's file", k, v)
				}
			}

			if len(m.Tensors) != len(ref.Tensors) {
				t.Errorf("%d tensors, llama.cpp's file has %d", len(m.Tensors), len(ref.Tensors))
			}
			for _, rt := range ref.Tensors {
				gt, ok := m.Tensor(rt.Name)
				if !ok {
					t.Errorf("tensor %s missing", rt.Name)
					continue
				}
				if gt.Type != rt.Type || !slices.Equal(gt.Shape, rt.Shape) {
					t.Errorf("%s: %s %v, llama.cpp's %s %v", rt.Name, gt.Type, gt.Shape, rt.Type, rt.Shape)
				}
			}
		})
	}
}

// TestStreamMatchesBuild: the file written piece by piece is byte for byte
// the one gguf.Writer writes from the model built in memory, for every
// architecture, with tensors of several pieces (token_embd below is 2^19
// values) and a mix; Size predicts its length.
func TestStreamMatchesBuild(t *testing.T) {
	for _, c := range []Config{
		{Arch: "llama", Layers: 2, Embd: 128, FF: 256, Heads: 4, KVHeads: 2, Vocab: 4096, Type: quant.Q8_0, Seed: 9},
		{Arch: "qwen2", Layers: 1, Embd: 64, FF: 96, Heads: 2, Vocab: 260, Type: quant.F16},
		{Arch: "qwen3", Layers: 1, Embd: 256, FF: 256, Heads: 2, Vocab: 300, Type: quant.Q4_K, TiedOutput: true},
		withMix(t, Config{Arch: "qwen3moe", Layers: 1, Embd: 256, FF: 256, Heads: 2, Vocab: 300, Experts: 4, ExpertsUsed: 2}, "Q4_K_M"),
		withMix(t, tinyGPTOSS, "MXFP4_MOE"),
	} {
		t.Run(c.Arch, func(t *testing.T) {
			w, err := Build(c)
			if err != nil {
				t.Fatal(err)
			}
			var want, got bytes.Buffer
			if _, err := w.WriteTo(&want); err != nil {
				t.Fatal(err)
			}
			f, err := Plan(c)
			if err != nil {
				t.Fatal(err)
			}
			n, err := f.WriteTo(&got)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(got.Len()) || n != f.Size() {
				t.Errorf("WriteTo says %d bytes, wrote %d, Size says %d", n, got.Len(), f.Size())
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				i := 0
				for i < min(got.Len(), want.Len()) && got.Bytes()[i] == want.Bytes()[i] {
					i++
				}
				t.Errorf("streamed file (%d bytes) differs from gguf.Writer's (%d bytes) from byte %d", got.Len(), want.Len(), i)
			}
		})
	}
}

// TestWriteFileProgress: progress rises to the file size, and the file
// is there, complete, under its name only after.
func TestWriteFileProgress(t *testing.T) {
	f, err := Plan(Config{Layers: 2, Embd: 256, FF: 512, Heads: 4, Vocab: 2048, Type: quant.Q8_0})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	var calls, last int64
	err = f.WriteFile(path, func(done, total int64) {
		calls++
		if done < last || total != f.Size() || done > total {
			t.Errorf("progress(%d, %d) after %d (size %d)", done, total, last, f.Size())
		}
		last = done
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 2 || last != f.Size() {
		t.Errorf("%d progress calls, last at %d bytes of %d", calls, last, f.Size())
	}
	m, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(matches) != 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

// failAfter accepts n bytes, then fails every write.
type failAfter struct{ n int }

var errDiskFull = errors.New("disk full")

func (w *failAfter) Write(b []byte) (int, error) {
	if len(b) > w.n {
		k := w.n
		w.n = 0
		return k, errDiskFull
	}
	w.n -= len(b)
	return len(b), nil
}

// TestWriteError: a failing writer stops the generation (no goroutine
// left blocked: the test would hang) and its error comes back.
func TestWriteError(t *testing.T) {
	f, err := Plan(Config{Layers: 4, Embd: 256, FF: 512, Heads: 4, Vocab: 8192, Type: quant.Q8_0})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{10, 3 << 20} {
		if _, err := f.WriteTo(&failAfter{n: at}); !errors.Is(err, errDiskFull) {
			t.Errorf("failing after %d bytes: error %v, want %v", at, err, errDiskFull)
		}
	}
}

// TestPresets: every preset lays out in its default file type, and
// gpt-oss-20b has the real model's tensors and about its size.
func TestPresets(t *testing.T) {
	for _, name := range PresetNames() {
		c := withMix(t, Presets[name], DefaultMix(Presets[name]))
		f, err := Plan(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s (%s): %d tensors, %.2f GB", name, DefaultMix(c), len(f.tensors), float64(f.Size())/1e9)
	}
	f, err := Plan(withMix(t, Presets["gpt-oss-20b"], "MXFP4_MOE"))
	if err != nil {
		t.Fatal(err)
	}
	var params int64
	types := map[quant.Type]int{}
	for _, ts := range f.tensors {
		params += ts.values
		types[ts.typ]++
	}
	if len(f.tensors) != 24*19+3 {
		t.Errorf("%d tensors, want %d", len(f.tensors), 24*19+3)
	}
	if params < 20.8e9 || params > 21.0e9 {
		t.Errorf("%d parameters, gpt-oss-20b has 20.9B", params)
	}
	if types[quant.MXFP4] != 24*3 || types[quant.Q8_0] != 24*4+2 {
		t.Errorf("types %v, want 72 MXFP4 and 98 Q8_0", types)
	}
	if f.Size() < 11.9e9 || f.Size() > 12.2e9 {
		t.Errorf("%d bytes, want about 12.0 GB", f.Size())
	}
	if _, err := Plan(withMix(t, Presets["gpt-oss-20b"], "Q4_K_M")); err == nil || !strings.Contains(err.Error(), "2880") {
		t.Errorf("gpt-oss-20b as Q4_K_M: error %v, want one naming the 2880-value rows", err)
	}
}

func TestMixMXFP4MOE(t *testing.T) {
	m := writeAndOpen(t, withMix(t, Config{Arch: "qwen3moe", Layers: 1, Embd: 64, FF: 64, Heads: 2, Vocab: 260,
		Experts: 4, ExpertsUsed: 2}, "mxfp4_moe"))
	for name, want := range map[string]quant.Type{"blk.0.ffn_up_exps.weight": quant.MXFP4, "blk.0.attn_q.weight": quant.Q8_0,
		"blk.0.ffn_gate_inp.weight": quant.F32, "token_embd.weight": quant.Q8_0, "output.weight": quant.Q8_0} {
		if tt, _ := m.Tensor(name); tt == nil || tt.Type != want {
			t.Errorf("%s: %v, want %s", name, tt, want)
		}
	}
	if _, _, err := Mix("Q3_K_XL"); err == nil || !strings.Contains(err.Error(), "MXFP4_MOE") {
		t.Errorf("unknown mix: error %v, want one listing the mixes", err)
	}
}

// TestRopeScaling: gpt-oss gets YaRN unless RopeScale is negative; other
// architectures get it when asked, with the defaults filled in.
func TestRopeScaling(t *testing.T) {
	base := Config{Layers: 1, Embd: 64, FF: 64, Heads: 2, Vocab: 300, Experts: 2, ExpertsUsed: 1, Type: quant.F32}
	for _, tc := range []struct {
		arch  string
		scale float32
		want  float64 // rope.scaling.factor, 0 = no rope.scaling keys
	}{
		{"gpt-oss", 0, 32}, {"gpt-oss", -1, 0}, {"gpt-oss", 4, 4}, {"llama", 0, 0}, {"qwen3moe", 8, 8},
	} {
		c := base
		c.Arch, c.RopeScale = tc.arch, tc.scale
		m := writeAndOpen(t, c)
		f, ok := m.Float(tc.arch + ".rope.scaling.factor")
		typ, _ := m.String(tc.arch + ".rope.scaling.type")
		orig, _ := m.Uint(tc.arch + ".rope.scaling.original_context_length")
		if tc.want == 0 {
			if ok || typ != "" {
				t.Errorf("%s RopeScale %g: rope.scaling %q factor %g, want none", tc.arch, tc.scale, typ, f)
			}
			continue
		}
		if f != tc.want || typ != "yarn" || orig != 4096 {
			t.Errorf("%s RopeScale %g: rope.scaling %q factor %g over %d, want yarn %g over 4096", tc.arch, tc.scale, typ, f, orig, tc.want)
		}
	}
}
