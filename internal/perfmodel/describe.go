package perfmodel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"braid/internal/gguf"
	"braid/internal/model"
	"braid/internal/modelgen"
	"braid/internal/quant"
)

// Described is a model given by its hyperparameters and the format of
// each class of tensor instead of its file, with, for the published
// figures, the hardware and split they were measured on.
type Described struct {
	Name string `json:"name"`
	// Source says where the hyperparameters come from.
	Source string `json:"source"`
	// Shape is the model's geometry in modelgen's terms (its Type and
	// TypeFor are set from Types).
	Shape modelgen.Config `json:"shape"`
	// Types are the formats by class: default (every matrix not named),
	// exps (routed experts), shexp (shared experts), ffn (dense FFN),
	// attn (attention and indexer), output, embd; or mix, a modelgen mix
	// (Q4_K_M, MXFP4_MOE) instead.
	Types map[string]string `json:"types"`
	// TypesSource says why those formats.
	TypesSource string `json:"types_source"`
	// The published figure: nodes (--nodes), split (tp N / pp N), context
	// and tok/s, with where it is from.
	Nodes   string  `json:"nodes"`
	Split   string  `json:"split"`
	Ctx     int     `json:"ctx"`
	Decode  float64 `json:"decode_tps"`
	Prefill float64 `json:"prefill_tps"`
	Prompt  int     `json:"prompt"`
	Figure  string  `json:"figure_source"`
	// ExpectMiss, when set, says why the model misses this figure by more
	// than 25 %: the test then requires the miss (so that the documented
	// gap stays true) instead of the match.
	ExpectMiss string `json:"expect_miss"`
}

// ReadDescribed reads a JSON array of Described.
func ReadDescribed(path string) ([]Described, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ds []Described
	if err := json.Unmarshal(b, &ds); err != nil {
		return nil, fmt.Errorf("perfmodel: %s: %w", path, err)
	}
	return ds, nil
}

// class names a tensor's class for Types.
func class(name string) string {
	switch {
	case strings.Contains(name, "_exps"):
		return "exps"
	case strings.Contains(name, "_shexp"):
		return "shexp"
	case name == "output.weight":
		return "output"
	case name == "token_embd.weight":
		return "embd"
	case strings.Contains(name, ".ffn_"):
		return "ffn"
	}
	return "attn"
}

// check bounds the shape, which comes from a user's file, before it is
// laid out: sizes past any real model's are refused naming the field.
func (d *Described) check() error {
	c := &d.Shape
	for _, f := range []struct {
		name   string
		v, max int
	}{{"Layers", c.Layers, 1024}, {"Embd", c.Embd, 1 << 17}, {"FF", c.FF, 1 << 20}, {"Heads", c.Heads, 4096},
		{"KVHeads", c.KVHeads, 4096}, {"HeadDim", c.HeadDim, 4096}, {"Vocab", c.Vocab, 1 << 21}, {"Experts", c.Experts, 4096},
		{"ExpertsUsed", c.ExpertsUsed, 4096}, {"ExpertFF", c.ExpertFF, 1 << 20}, {"NextN", c.NextN, 16}, {"LeadingDense", c.LeadingDense, 1024},
		{"ExpertShared", c.ExpertShared, 64}, {"QLoraRank", c.QLoraRank, 1 << 16}, {"KVLoraRank", c.KVLoraRank, 1 << 16},
		{"QKNopeDim", c.QKNopeDim, 4096}, {"VHeadDim", c.VHeadDim, 4096}, {"RopeDim", c.RopeDim, 4096},
		{"IndexerHeads", c.IndexerHeads, 4096}, {"IndexerDim", c.IndexerDim, 4096}, {"SSMState", c.SSMState, 4096},
		{"SSMKeyHeads", c.SSMKeyHeads, 4096}, {"SSMValueHeads", c.SSMValueHeads, 4096}, {"Context", c.Context, 1 << 24}} {
		if f.v < 0 || f.v > f.max {
			return fmt.Errorf("perfmodel: %s: shape.%s %d: want 0 to %d", d.Name, f.name, f.v, f.max)
		}
	}
	if c.Layers < 1 || c.Embd < 1 || c.Vocab < 1 {
		return fmt.Errorf("perfmodel: %s: shape needs Layers, Embd and Vocab", d.Name)
	}
	return nil
}

// config is the modelgen configuration of d with its formats.
func (d *Described) config() (modelgen.Config, error) {
	if err := d.check(); err != nil {
		return modelgen.Config{}, err
	}
	c := d.Shape
	c.Name = d.Name
	c.ShapeOnly = true
	if mix, ok := d.Types["mix"]; ok {
		t, f, err := modelgen.Mix(mix)
		if err != nil {
			return c, fmt.Errorf("perfmodel: %s: %w", d.Name, err)
		}
		c.Type, c.TypeFor = t, f
		return c, nil
	}
	types := map[string]quant.Type{}
	for k, v := range d.Types {
		t, err := quant.ParseType(v)
		if err != nil {
			return c, fmt.Errorf("perfmodel: %s: types.%s: %w", d.Name, k, err)
		}
		switch k {
		case "default", "exps", "shexp", "ffn", "attn", "output", "embd":
		default:
			return c, fmt.Errorf("perfmodel: %s: types.%s: unknown class (default, exps, shexp, ffn, attn, output, embd)", d.Name, k)
		}
		types[k] = t
	}
	def, ok := types["default"]
	if !ok {
		return c, fmt.Errorf("perfmodel: %s: types: no default", d.Name)
	}
	c.Type = def
	c.EmbedType = types["embd"]
	c.TypeFor = func(name string) quant.Type {
		t := types[class(name)]
		if t == 0 {
			t = def
		}
		if strings.HasSuffix(name, "attn_k_b.weight") && t.BlockSize() == 256 {
			// MLA's K_b rows are qk_nope wide (192 in GLM-5), which no
			// 256-value block divides: llama-quantize falls back to Q5_0.
			return quant.Q5_0
		}
		return t
	}
	return c, nil
}

// Open lays out d as a sparse GGUF in dir (its header, no weights; see
// modelgen.File.WriteShape) and opens it, so that the planner and this
// package read it as they read a real file. The caller closes it.
func (d *Described) Open(dir string) (*gguf.Model, *model.Config, error) {
	c, err := d.config()
	if err != nil {
		return nil, nil, err
	}
	f, err := modelgen.Plan(c)
	if err != nil {
		return nil, nil, fmt.Errorf("perfmodel: %s: %w", d.Name, err)
	}
	path := filepath.Join(dir, strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' {
			return '_'
		}
		return r
	}, d.Name)+".shape.gguf")
	if err := f.WriteShape(path); err != nil {
		return nil, nil, err
	}
	g, err := gguf.Open(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := model.ReadConfig(g)
	if err != nil {
		g.Close()
		return nil, nil, err
	}
	return g, cfg, nil
}
