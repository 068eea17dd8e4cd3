package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"braid/internal/sample"
)

// budgetedText samples like sampleText, telling the constraint its budget
// before each token; it returns the text and whether the closure was
// forced.
func budgetedText(t testing.TB, gd *Guide, pieces []string, eog func(int32) bool, rng *rand.Rand, budget int, p sample.Params) (string, bool) {
	t.Helper()
	c := gd.NewConstraint()
	var sb strings.Builder
	smp, err := sample.New(p, len(pieces))
	if err != nil {
		t.Fatal(err)
	}
	noise := make([]float32, 2*len(pieces))
	for i := range noise {
		noise[i] = float32(rng.NormFloat64() * 3)
	}
	row := make([]float32, len(pieces))
	for n := range budget {
		c.Budget(budget - n)
		copy(row, noise[rng.IntN(len(pieces)):])
		id := c.Sample(smp, row, false)
		if eog(id) {
			break
		}
		sb.WriteString(pieces[id])
		if c.Advance(id) {
			break
		}
	}
	return sb.String(), c.ClosureForced()
}

type schemaRow struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

func loadSchemas(t testing.TB) []schemaRow {
	data, err := os.ReadFile("testdata/schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []schemaRow
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestClosureKeepsEverySchemaValid: random logits under budgets from the
// schema's minimum up, over every schema of the table, with a real
// vocabulary (every byte a token) and the toy one (not): every reply is
// complete and valid for its schema, and none shorter than the minimum
// exists (MinTokens is achieved, not just bounded, where the budget is
// exactly it).
func TestClosureKeepsEverySchemaValid(t *testing.T) {
	type vocabCase struct {
		name   string
		pieces []string
		eog    func(int32) bool
		eogs   []int32
	}
	toy, toyEOG := toyVocab()
	cases := []vocabCase{{"toy", toy, func(id int32) bool { return id < 2 }, toyEOG}}
	for _, name := range []string{"llama-spm", "qwen2"} {
		if testing.Short() && name == "qwen2" {
			continue
		}
		tk := loadTokenizer(t, name)
		cases = append(cases, vocabCase{name, TokenPieces(tk, nil), tk.IsEOG, tk.EOGs()})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, vc := range cases {
		v := NewVocab(vc.pieces, vc.eogs)
		forced := 0
		for _, row := range loadSchemas(t) {
			g, err := CompileSchema(row.Schema)
			if err != nil {
				t.Fatalf("%s: %v", row.Name, err)
			}
			gd := NewGuide(g, v)
			min, ok := gd.MinTokens()
			if !ok {
				// The toy vocabulary lacks some bytes (of formats,
				// patterns): nothing is promised there.
				t.Logf("%s/%s: no sentence the vocabulary can write was found", vc.name, row.Name)
				continue
			}
			for _, extra := range []int{0, 1, 2, 5, 12} {
				budget := min + extra
				p := sample.Params{Temperature: 1.5, TopP: 1, RepeatPenalty: 1, Seed: rng.Uint64()}
				text, f := budgetedText(t, gd, vc.pieces, vc.eog, rng, budget, p)
				if f {
					forced++
				}
				if err := ValidateJSON(row.Schema, []byte(text)); err != nil || !g.Accepts(text) {
					t.Errorf("%s/%s: budget %d (min %d): %q is not a valid reply: %v", vc.name, row.Name, budget, min, text, err)
				}
			}
		}
		t.Logf("%s: %d forced closures", vc.name, forced)
		if forced == 0 {
			t.Errorf("%s: no closure was ever forced; the test tests nothing", vc.name)
		}
	}
}

// bruteMin is the fewest tokens whose concatenation is a sentence of g,
// by breadth-first search over texts (up to depth tokens), independent of
// the automaton's closure code: -1 when none is within depth.
func bruteMin(g *Grammar, pieces []string, depth int) int {
	level := map[string]bool{"": true}
	for d := 0; d <= depth; d++ {
		next := map[string]bool{}
		for text := range level {
			if g.Accepts(text) {
				return d
			}
			for _, p := range pieces {
				if p == "" {
					continue
				}
				if ok, _ := g.Check(text + p); ok {
					next[text+p] = true
				}
			}
		}
		level = next
	}
	return -1
}

// TestMinTokensExact: MinTokens counts tokens, not bytes: where a longer
// text takes fewer tokens it finds that, matching a brute-force search.
func TestMinTokensExact(t *testing.T) {
	pieces := []string{"", "a", "b", "c", "d", "e", "f", "cdef", "\"", "\"}", "{\"", "x", "1", "}", ":", "k\":", "k"}
	eog := []int32{0}
	v := NewVocab(pieces, eog)
	for _, src := range []string{
		`root ::= "ab" | "cdef"`,
		`root ::= "abab" | "cdefcdef"`,
		`root ::= "{" "\"k\":" ( "1" | "\"" [a-f]* "\"" ) "}"`,
		`root ::= ("a" | "cdef")+ "b"`,
		`root ::= "x"* "cdef" | "ab" "ab" "ab"`,
		`root ::= [a-f] [a-f] [a-f] [a-f]`,
	} {
		g := mustGBNF(t, src)
		want := bruteMin(g, pieces, 8)
		got, ok := NewGuide(g, v).MinTokens()
		if !ok || got != want {
			t.Errorf("%s: MinTokens %d (ok %v), brute force %d", src, got, ok, want)
		}
	}
}

// TestClosureForcedAtMinimum: with the budget exactly the minimum, only
// the shortest completions are allowed from the start.
func TestClosureForcedAtMinimum(t *testing.T) {
	pieces := []string{"", "a", "b", "c", "d", "e", "f", "cdef"}
	v := NewVocab(pieces, []int32{0})
	g := mustGBNF(t, `root ::= "ab" | "cdef" | "b"+`)
	gd := NewGuide(g, v)
	if n, _ := gd.MinTokens(); n != 1 {
		t.Fatalf("MinTokens %d, want 1 (\"cdef\" or \"b\")", n)
	}
	for seed := range 20 {
		text, _ := budgetedText(t, gd, pieces, func(id int32) bool { return id == 0 }, rand.New(rand.NewPCG(uint64(seed), 1)), 1, sample.Params{Temperature: 2, TopP: 1, RepeatPenalty: 1, Seed: uint64(seed)})
		if text != "cdef" && text != "b" {
			t.Errorf("seed %d: budget 1 wrote %q", seed, text)
		}
	}
}

// TestNoFiniteSentence: a grammar that never ends has no minimum.
func TestNoFiniteSentence(t *testing.T) {
	g := mustGBNF(t, `root ::= "a" root`)
	gd := NewGuide(g, NewVocab([]string{"", "a"}, []int32{0}))
	if gd.HasFiniteSentence() {
		t.Error("root ::= \"a\" root has a finite sentence?")
	}
	if n, ok := gd.MinTokens(); ok {
		t.Errorf("MinTokens %d for a grammar without end", n)
	}
}
