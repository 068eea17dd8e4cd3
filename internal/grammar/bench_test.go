package grammar

import (
	"math/rand/v2"
	"testing"

	"braid/internal/sample"
)

// The benchmarks run a schema of twenty fields (testdata/schemas.json,
// "twenty-fields") over the llama-bpe vocabulary (128256 tokens): on
// demand, go test -run XXX -bench . ./internal/grammar/

func twentyFields(b *testing.B) (schemaCase, []int32, *Vocab, []string) {
	var c schemaCase
	for _, x := range loadSchemaCases(b) {
		if x.Name == "twenty-fields" {
			c = x
		}
	}
	tk := loadTokenizer(b, "llama-bpe")
	pieces := TokenPieces(tk, nil)
	// The path: the tokens of a valid reply, as a tokenizer splits it.
	path := tk.Encode(c.Valid[0], false, false)
	return c, path, NewVocab(pieces, tk.EOGs()), pieces
}

// BenchmarkSchemaCompile: the schema compiled, bound to the vocabulary,
// and the first mask computed (what a request pays before its first
// token when its schema is new).
func BenchmarkSchemaCompile(b *testing.B) {
	c, _, v, _ := twentyFields(b)
	b.ResetTimer()
	for b.Loop() {
		g, err := CompileSchema(c.Schema)
		if err != nil {
			b.Fatal(err)
		}
		if err := NewGuide(g, v).Prepare(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMaskCold: a reply's every mask computed for the first time (a
// new guide per reply); reported per token of the reply.
func BenchmarkMaskCold(b *testing.B) {
	c, path, v, _ := twentyFields(b)
	g, err := CompileSchema(c.Schema)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		gd := NewGuide(g, v)
		s := gd.a.start
		gd.mu.Lock()
		for _, id := range path {
			gd.maskFor(s)
			for i := 0; i < len(v.pieces[id]); i++ {
				s = gd.a.step(s, v.pieces[id][i])
			}
		}
		gd.mu.Unlock()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(path)), "ns/token")
}

// stepBench samples along the reply's path with and without the guide
// (masks warm: the schema seen before), a full row of random logits per
// token copied in each time as a model would write it.
func stepBench(b *testing.B, constrained bool, p sample.Params) {
	c, path, v, pieces := twentyFields(b)
	g, err := CompileSchema(c.Schema)
	if err != nil {
		b.Fatal(err)
	}
	gd := NewGuide(g, v)
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]float32, 2*len(pieces))
	for i := range noise {
		noise[i] = float32(rng.NormFloat64() * 3)
	}
	row := make([]float32, len(pieces))
	smp, err := sample.New(p, len(pieces))
	if err != nil {
		b.Fatal(err)
	}
	run := func() {
		con := gd.NewConstraint()
		for k, id := range path {
			copy(row, noise[k*7919%len(pieces):])
			if constrained {
				con.Sample(smp, row, false)
				con.Advance(id) // the path, whatever was sampled
			} else {
				smp.Sample(row)
			}
		}
	}
	run() // warm the masks
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(path)), "ns/token")
}

func BenchmarkStepFreeTopK(b *testing.B) {
	stepBench(b, false, sample.DefaultParams())
}

func BenchmarkStepConstrainedTopK(b *testing.B) {
	stepBench(b, true, sample.DefaultParams())
}

func BenchmarkStepFreeGreedy(b *testing.B) {
	stepBench(b, false, sample.Params{Temperature: 0, TopP: 1, RepeatPenalty: 1})
}

func BenchmarkStepConstrainedGreedy(b *testing.B) {
	stepBench(b, true, sample.Params{Temperature: 0, TopP: 1, RepeatPenalty: 1})
}
