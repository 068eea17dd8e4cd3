package grammar

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"braid/internal/gguf"
	"braid/internal/sample"
	"braid/internal/sharedtest"
	"braid/internal/tokenizer"
)

const vocabDir = "../../../shared/testdata/vocab"

var (
	vocabMu sync.Mutex
	vocabs  = map[string]*tokenizer.Tokenizer{}
)

// loadTokenizer returns the tokenizer of ggml-vocab-NAME.gguf or skips.
func loadTokenizer(tb testing.TB, name string) *tokenizer.Tokenizer {
	tb.Helper()
	vocabMu.Lock()
	defer vocabMu.Unlock()
	if tk, ok := vocabs[name]; ok {
		return tk
	}
	path := filepath.Join(vocabDir, "ggml-vocab-"+name+".gguf")
	if _, err := os.Stat(path); err != nil {
		sharedtest.Missing(tb, "vocab test data not available (%v)", err)
	}
	m, err := gguf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer m.Close()
	tk, err := tokenizer.FromGGUF(m)
	if err != nil {
		tb.Fatal(err)
	}
	vocabs[name] = tk
	return tk
}

// toyVocab is every string of up to three bytes over a small alphabet that
// covers JSON syntax, plus two end tokens (ids 0 and 1, empty pieces).
func toyVocab() ([]string, []int32) {
	alpha := []string{"{", "}", "[", "]", "\"", ":", ",", " ", "a", "1", "0", "-", ".", "e", "\\", "n", "t", "r", "u", "l", "f", "s", "é"}
	pieces := []string{"", ""}
	for _, a := range alpha {
		pieces = append(pieces, a)
		for _, b := range alpha {
			pieces = append(pieces, a+b)
			if len(pieces)%3 == 0 {
				for _, c := range alpha[:8] {
					pieces = append(pieces, a+b+c)
				}
			}
		}
	}
	return pieces, []int32{0, 1}
}

// bruteAllowed says what a mask must hold: a token is allowed when the
// text so far plus its piece is a viable prefix; an end token when the text
// is complete.
func bruteAllowed(g *Grammar, text string, pieces []string, eog map[int32]bool) []bool {
	out := make([]bool, len(pieces))
	for id, p := range pieces {
		if eog[int32(id)] {
			out[id] = g.Accepts(text)
			continue
		}
		if p == "" {
			continue
		}
		ok, _ := g.Check(text + p)
		out[id] = ok
	}
	return out
}

func TestMaskMatchesBruteForce(t *testing.T) {
	pieces, eogs := toyVocab()
	eog := map[int32]bool{0: true, 1: true}
	v := NewVocab(pieces, eogs)
	for _, src := range []string{jsonGBNF, `root ::= "a"{2,5} ("," [0-9]+)* "."?`, `root ::= ("ab" | "a" "b"+ | "\"" [^"]* "\"")+`} {
		g := mustGBNF(t, src)
		gd := NewGuide(g, v)
		rng := rand.New(rand.NewPCG(1, 2))
		for trial := range 40 {
			c := gd.NewConstraint()
			text := ""
			for step := range 30 {
				want := bruteAllowed(g, text, pieces, eog)
				gd.mu.Lock()
				m := gd.maskFor(c.s)
				gd.mu.Unlock()
				n := 0
				for id := range pieces {
					if got := m.allows(int32(id)); got != want[id] {
						t.Fatalf("%.20q trial %d step %d after %q: token %d %q: mask %v, brute force %v", src, trial, step, text, id, pieces[id], got, want[id])
					}
					if want[id] {
						n++
					}
				}
				if n != m.count {
					t.Fatalf("count %d, want %d", m.count, n)
				}
				if n == 0 {
					break
				}
				// Follow a random allowed token.
				row := make([]float32, len(pieces))
				for i := range row {
					row[i] = float32(rng.NormFloat64())
				}
				smp, _ := sample.New(sample.Params{Temperature: 1, TopP: 1, RepeatPenalty: 1, Seed: rng.Uint64()}, len(pieces))
				id := c.Sample(smp, row, false)
				if !want[id] {
					t.Fatalf("sampled a refused token %d %q after %q", id, pieces[id], text)
				}
				if eog[id] {
					break
				}
				text += pieces[id]
				done := c.Advance(id)
				if ok, complete := g.Check(text); !ok || done && !(complete && gd.a.complete(c.s)) {
					t.Fatalf("after %q: ok %v complete %v, Advance said done %v", text, ok, complete, done)
				}
				if done {
					break
				}
			}
		}
	}
}

// sampleText generates with random logits until the constraint ends.
func sampleText(t testing.TB, gd *Guide, pieces []string, eog func(int32) bool, rng *rand.Rand, maxTok int, p sample.Params) (string, bool) {
	c := gd.NewConstraint()
	var sb strings.Builder
	smp, err := sample.New(p, len(pieces))
	if err != nil {
		t.Fatal(err)
	}
	// Random logits: windows of a random buffer (drawing a whole row of
	// normal variates per step would cost more than everything tested).
	noise := make([]float32, 2*len(pieces))
	for i := range noise {
		noise[i] = float32(rng.NormFloat64() * 3)
	}
	row := make([]float32, len(pieces))
	for range maxTok {
		copy(row, noise[rng.IntN(len(pieces)):])
		id := c.Sample(smp, row, false)
		if eog(id) {
			return sb.String(), true
		}
		sb.WriteString(pieces[id])
		if c.Advance(id) {
			return sb.String(), true
		}
	}
	return sb.String(), false
}

func TestRandomGenerationRealVocab(t *testing.T) {
	for _, name := range []string{"llama-bpe", "llama-spm", "qwen2"} {
		tk := loadTokenizer(t, name)
		pieces := TokenPieces(tk, nil)
		v := NewVocab(pieces, tk.EOGs())
		g := mustGBNF(t, jsonGBNF)
		gd := NewGuide(g, v)
		rng := rand.New(rand.NewPCG(7, 8))
		ends := 0
		for i := range 30 {
			p := sample.Params{Temperature: 1, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, Seed: uint64(i)}
			if i%3 == 0 {
				p = sample.Params{Temperature: 0, TopP: 1, RepeatPenalty: 1}
			}
			text, ended := sampleText(t, gd, pieces, tk.IsEOG, rng, 200, p)
			ok, complete := g.Check(text)
			if !ok || ended && !complete {
				t.Fatalf("%s: invalid output (ended %v): %q", name, ended, text)
			}
			if ended {
				ends++
			}
		}
		t.Logf("%s: %d trie nodes, %d of 30 outputs complete, %d automaton states", name, v.Nodes(), ends, gd.States())
	}
}

func TestMaskOverwritesRowWhenAsked(t *testing.T) {
	pieces, eogs := toyVocab()
	v := NewVocab(pieces, eogs)
	gd := NewGuide(mustGBNF(t, `root ::= "a"`), v)
	c := gd.NewConstraint()
	row := make([]float32, len(pieces))
	smp, _ := sample.New(sample.Params{Temperature: 0, TopP: 1, RepeatPenalty: 1}, len(pieces))
	id := c.Sample(smp, row, true)
	if pieces[id] != "a" {
		t.Fatalf("sampled %q", pieces[id])
	}
	for i, l := range row {
		if (pieces[i] == "a") != !math.IsInf(float64(l), -1) {
			t.Fatalf("row[%d] (%q) = %v after masking", i, pieces[i], l)
		}
	}
	if !c.Advance(id) {
		t.Error("Advance did not report the end of a finished grammar")
	}
	// Done: only end tokens.
	id = c.Sample(smp, row, false)
	if id != 0 && id != 1 {
		t.Errorf("after the end, sampled %d", id)
	}
}

// TestNoAllocsPerToken: with its masks computed, a constrained sequence
// samples and advances without allocating.
func TestNoAllocsPerToken(t *testing.T) {
	pieces, eogs := byteVocab()
	g, err := CompileSchema([]byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"integer"}}},"required":["a","b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	gd := NewGuide(g, NewVocab(pieces, eogs))
	text := `{"a": "xyz é", "b": [1, 22, 333]}`
	ids := make([]int32, 0, len(text))
	for i := 0; i < len(text); i++ {
		ids = append(ids, int32(2+int(text[i]))) // the byte tokens
	}
	row := make([]float32, len(pieces))
	smp, _ := sample.New(sample.Params{Temperature: 0.8, TopK: 20, TopP: 0.9, RepeatPenalty: 1, Seed: 1}, len(pieces))
	run := func() {
		c := gd.NewConstraint()
		for _, id := range ids {
			c.Sample(smp, row, false)
			c.Advance(id)
		}
	}
	run() // the masks
	c := gd.NewConstraint()
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		if i == len(ids) {
			c, i = gd.NewConstraint(), 0
		}
		c.Sample(smp, row, false)
		c.Advance(ids[i])
		i++
	})
	if allocs > 0.05 {
		t.Errorf("%.2f allocations per token", allocs)
	}
	_ = run
}

// TestSpeculativeVerification plays speculative decoding against a
// grammar: a drafter proposes random tokens, cut at the first the grammar
// refuses (Allows); the target's rows are masked position by position
// with a fork of the constraint advanced by the draft, the drafts kept
// while the target's greedy choice agrees, then its own token; the
// sequence's constraint advances by what is kept. Whatever the drafts,
// the output follows the grammar, and equals plain greedy decoding under
// the grammar of the same rows.
func TestSpeculativeVerification(t *testing.T) {
	pieces, eogs := byteVocab()
	g := mustGBNF(t, strings.Replace(jsonGBNF, "root   ::= value", `root   ::= (value " "){25}`, 1))
	gd := NewGuide(g, NewVocab(pieces, eogs))
	rng := rand.New(rand.NewPCG(4, 4))
	greedy, _ := sample.New(sample.Params{Temperature: 0, TopP: 1, RepeatPenalty: 1}, len(pieces))
	// The "model": logits that depend on the position only, so plain and
	// speculative decoding see the same rows.
	rowAt := func(pos int) []float32 {
		r := rand.New(rand.NewPCG(uint64(pos), 77))
		row := make([]float32, len(pieces))
		for i := range row {
			row[i] = float32(r.NormFloat64())
		}
		row[0], row[1] = -5, -5 // the end comes late
		return row
	}
	plain := func() []int32 {
		c := gd.NewConstraint()
		var out []int32
		for pos := 0; pos < 300; pos++ {
			id := c.Sample(greedy, rowAt(pos), false)
			out = append(out, id)
			if id < 2 || c.Advance(id) {
				break
			}
		}
		return out
	}()
	if len(plain) < 20 {
		t.Fatalf("plain decoding gave only %d tokens: the test needs a longer output", len(plain))
	}
	for trial := range 20 {
		c := gd.NewConstraint()
		var out []int32
		done := false
		for !done && len(out) < 300 {
			// Draft up to 4 tokens, cut where the grammar refuses.
			f := c.Fork()
			var drafts []int32
			for range 1 + rng.IntN(4) {
				d := int32(rng.IntN(len(pieces)))
				if trial%2 == 0 && len(plain) > len(out)+len(drafts) && rng.IntN(3) > 0 {
					d = plain[len(out)+len(drafts)] // a good drafter, often
				}
				if !f.Allows(d) {
					break
				}
				drafts = append(drafts, d)
				if f.Advance(d) {
					break
				}
			}
			// Verify: each position's row masked by a fork at that point.
			v := c.Fork()
			for i := 0; i <= len(drafts); i++ {
				id := v.Sample(greedy, rowAt(len(out)), false)
				out = append(out, id)
				if id < 2 || c.Advance(id) {
					done = true
					break
				}
				v.Advance(id)
				if i == len(drafts) || id != drafts[i] {
					break
				}
			}
		}
		text := ""
		for _, id := range out {
			text += pieces[id]
		}
		if ok, _ := g.Check(text); !ok {
			t.Fatalf("trial %d: %q does not follow the grammar", trial, text)
		}
		if len(plain) < 300 && len(out) != len(plain) || len(out) < len(plain) {
			t.Fatalf("trial %d: %d tokens, plain decoding %d", trial, len(out), len(plain))
		}
		for i := range plain {
			if out[i] != plain[i] {
				t.Fatalf("trial %d: token %d is %d, plain decoding %d", trial, i, out[i], plain[i])
			}
		}
	}
}
