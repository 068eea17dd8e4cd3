package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"braid/internal/sample"
	"braid/internal/sharedtest"
)

type schemaCase struct {
	Name    string          `json:"name"`
	Schema  json.RawMessage `json:"schema"`
	Valid   []string        `json:"valid"`
	Invalid []string        `json:"invalid"`
}

func loadSchemaCases(t testing.TB) []schemaCase {
	data, err := os.ReadFile("testdata/schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []schemaCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

func TestSchemaTable(t *testing.T) {
	cases := loadSchemaCases(t)
	if len(cases) < 30 {
		t.Fatalf("only %d schemas in the table", len(cases))
	}
	for _, c := range cases {
		g, err := CompileSchema(c.Schema)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		for _, v := range c.Valid {
			if err := ValidateJSON(c.Schema, []byte(v)); err != nil {
				t.Errorf("%s: the validator refuses the valid %s: %v", c.Name, v, err)
			}
			if !g.Accepts(v) {
				t.Errorf("%s: the grammar refuses the valid %s", c.Name, v)
			}
		}
		for _, v := range c.Invalid {
			if err := ValidateJSON(c.Schema, []byte(v)); err == nil {
				t.Errorf("%s: the validator accepts the invalid %s", c.Name, v)
			}
			if g.Accepts(v) {
				t.Errorf("%s: the grammar accepts the invalid %s", c.Name, v)
			}
		}
	}
}

func TestSchemaUnsupported(t *testing.T) {
	data, err := os.ReadFile("testdata/unsupported_schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Schema  json.RawMessage `json:"schema"`
		Keyword string          `json:"keyword"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		_, err := CompileSchema(c.Schema)
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Errorf("%s: got %v, want a SchemaError", c.Schema, err)
			continue
		}
		if se.Keyword != c.Keyword {
			t.Errorf("%s: error names %q, want %q: %v", c.Schema, se.Keyword, c.Keyword, err)
		}
	}
}

// byteVocab has every single byte, common JSON pieces and words, and two
// end tokens: any grammar over bytes can be followed.
func byteVocab() ([]string, []int32) {
	pieces := []string{"", ""}
	for b := range 256 {
		pieces = append(pieces, string([]byte{byte(b)}))
	}
	for _, p := range []string{`{"`, `": `, `", "`, `"}`, `}, {"`, `true`, `false`, `null`, `": "`, `, "`, `[`, `]`, `": [`, `"]`,
		`12`, `345`, `.5`, `-1`, `00`, ` the`, ` a`, `name`, `id`, `\n`, `\"`, `é`, `☃`, "\n  ", `abc`, `XYZ`, `2026`, `-11-`, `T10:`, `:00Z`} {
		pieces = append(pieces, p)
	}
	return pieces, []int32{0, 1}
}

// TestSchemaRandomGeneration: whatever the logits, what a schema's guide
// lets through is valid for the schema once complete, and a viable prefix
// otherwise. Random logits stand for a model whose text is noise.
func TestSchemaRandomGeneration(t *testing.T) {
	type vocabT struct {
		name   string
		pieces []string
		eog    func(int32) bool
		v      *Vocab
		maxTok int
		every  int // test every n-th schema with it
	}
	var vocabs []vocabT
	bp, be := byteVocab()
	vocabs = append(vocabs, vocabT{"bytes", bp, func(id int32) bool { return id < 2 }, NewVocab(bp, be), 2000, 1})
	if _, err := os.Stat(vocabDir); err == nil {
		// A 128k vocabulary costs a full-row sample per token: a third of
		// the schemas.
		tk := loadTokenizer(t, "llama-bpe")
		p := TokenPieces(tk, nil)
		vocabs = append(vocabs, vocabT{"llama-bpe", p, tk.IsEOG, NewVocab(p, tk.EOGs()), 400, 3})
	} else if sharedtest.Required() {
		t.Fatalf("%s=1 and the llama-bpe vocabulary is missing: %v", sharedtest.Env, err)
	}
	runs := 8
	if testing.Short() {
		runs = 3
	}
	completed, tried := 0, 0
	for ci, c := range loadSchemaCases(t) {
		g, err := CompileSchema(c.Schema)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		for _, vc := range vocabs {
			if ci%vc.every != 0 {
				continue
			}
			gd := NewGuide(g, vc.v)
			if err := gd.Prepare(); err != nil {
				t.Fatalf("%s/%s: %v", c.Name, vc.name, err)
			}
			rng := rand.New(rand.NewPCG(uint64(len(c.Name)), 99))
			complete := 0
			for i := range runs {
				p := sample.Params{Temperature: 1.5, TopK: 200, TopP: 1, RepeatPenalty: 1, Seed: uint64(i)}
				if i%2 == 1 {
					p = sample.Params{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, RepeatPenalty: 1, Seed: uint64(i)}
				}
				text, ended := sampleText(t, gd, vc.pieces, vc.eog, rng, vc.maxTok, p)
				if !ended {
					if ok, _ := g.Check(text); !ok {
						t.Fatalf("%s/%s: not a viable prefix: %q", c.Name, vc.name, text)
					}
					continue
				}
				complete++
				if err := ValidateJSON(c.Schema, []byte(text)); err != nil {
					t.Fatalf("%s/%s: generated %q: %v", c.Name, vc.name, text, err)
				}
			}
			tried++
			if complete > 0 {
				completed++
			} else {
				t.Logf("%s/%s: no output of %d completed within %d tokens", c.Name, vc.name, runs, vc.maxTok)
			}
		}
	}
	// Unbounded strings may run past the token limit under random logits;
	// most schemas must still complete.
	if completed < tried*3/4 {
		t.Errorf("only %d of %d schema/vocabulary pairs ever completed", completed, tried)
	}
}

// TestNumberRangesExact enumerates numerals and checks the grammar of each
// range against the value: exact in both directions for the numerals the
// grammar writes (no leading zeros or exponents).
func TestNumberRangesExact(t *testing.T) {
	var nums []string
	for i := 0; i <= 14; i++ {
		for _, f := range []string{"", ".0", ".00", ".5", ".05", ".999"} {
			nums = append(nums, fmt.Sprintf("%d%s", i, f), fmt.Sprintf("-%d%s", i, f))
		}
	}
	bounds := []string{"", "-10", "-3", "-1", "0", "1", "2", "9", "12"}
	for _, typ := range []string{"number", "integer"} {
		for _, lo := range bounds {
			for _, hi := range bounds {
				for _, excl := range []int{0, 1, 2, 3} {
					s := map[string]any{"type": typ}
					if lo != "" {
						k := "minimum"
						if excl&1 != 0 {
							k = "exclusiveMinimum"
						}
						s[k] = json.Number(lo)
					}
					if hi != "" {
						k := "maximum"
						if excl&2 != 0 {
							k = "exclusiveMaximum"
						}
						s[k] = json.Number(hi)
					}
					schema, _ := json.Marshal(s)
					g, err := CompileSchema(schema)
					if err != nil {
						var se *SchemaError
						if errors.As(err, &se) && strings.Contains(se.Msg, "lies between") {
							continue
						}
						t.Fatalf("%s: %v", schema, err)
					}
					for _, n := range nums {
						want := ValidateJSON(schema, []byte(n)) == nil
						if n == "-0" || strings.HasPrefix(n, "-0.0") && strings.Trim(n[4:], "0") == "" || n == "-0.0" {
							continue // negative zero: never written
						}
						if typ == "integer" && strings.Contains(n, ".") {
							want = false
						}
						if got := g.Accepts(n); got != want {
							t.Fatalf("%s: %s: grammar %v, value check %v", schema, n, got, want)
						}
					}
				}
			}
		}
	}
}

func TestNatRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		a := rng.Int64N(3000)
		b := a + rng.Int64N(3000)
		if rng.IntN(4) == 0 {
			a, b = rng.Int64N(20), rng.Int64N(1e9)+20
		}
		bld := NewBuilder()
		bld.Define("root", natRange(a, b))
		g, err := bld.Build("root")
		if err != nil {
			t.Fatal(err)
		}
		for range 300 {
			x := rng.Int64N(b*2 + 10)
			if got, want := g.Accepts(strconv.FormatInt(x, 10)), x >= a && x <= b; got != want {
				t.Fatalf("[%d, %d]: %d: got %v", a, b, x, got)
			}
		}
		for _, x := range []int64{a, b, a - 1, b + 1} {
			if got, want := g.Accepts(strconv.FormatInt(x, 10)), x >= a && x <= b; x >= 0 && got != want {
				t.Fatalf("[%d, %d]: %d: got %v", a, b, x, got)
			}
		}
		if g.Accepts("0" + strconv.FormatInt(a+1, 10)) {
			t.Fatalf("[%d, %d]: accepted a leading zero", a, b)
		}
	}
	_ = big.NewInt
}
