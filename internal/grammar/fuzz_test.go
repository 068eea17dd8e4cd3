package grammar

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// FuzzParseGBNF: any text parses into a grammar or gives an error, never a
// panic or a hang; a grammar built checks any input, and every prefix of an
// accepted input is viable.
func FuzzParseGBNF(f *testing.F) {
	for _, s := range []string{
		jsonGBNF,
		`root ::= "a"{2,4} [^"\\] . ( "x" | "y" )* # c`,
		"root ::= (\n \"a\"\n | b\n)\nb ::= [\\x00-\\U0010FFFF]+",
		`root ::= root`, `root ::= "\u00e9"{,3}`, `root ::= [`, `root ::= <x>`, `root ::= "a" {1,2}`,
	} {
		f.Add(s, `{"a": [1, "x"]}`)
	}
	f.Fuzz(func(t *testing.T, src, input string) {
		if len(src) > 4096 || len(input) > 4096 {
			return
		}
		g, err := ParseGBNF(src)
		if err != nil {
			return
		}
		if g.Elements() > 1<<16 {
			return
		}
		ok, complete := g.Check(input)
		if complete && !ok {
			t.Fatal("complete but not viable")
		}
		if g.automatonForCheck().a.overflow {
			return // too ambiguous to follow: states were cut off
		}
		if ok {
			for i := range len(input) {
				if p, _ := g.Check(input[:i]); !p {
					t.Fatalf("%q is viable but its prefix %q is not", input, input[:i])
				}
			}
		}
	})
}

// randomSentence walks the automaton from the start with random bytes
// the grammar allows, up to n bytes; complete says whether it ended in an
// accepting state it chose to stop at.
func randomSentence(g *Grammar, seed uint64, n int) (string, bool) {
	la := g.automatonForCheck()
	la.mu.Lock()
	defer la.mu.Unlock()
	a := la.a
	rng := rand.New(rand.NewPCG(seed, seed^77))
	s := a.start
	var out []byte
	var next []byte
	for range n {
		if a.states[s].accept && rng.IntN(4) == 0 {
			return string(out), true
		}
		next = next[:0]
		for b := range 256 {
			if a.step(s, byte(b)) != dead {
				next = append(next, byte(b))
			}
		}
		if len(next) == 0 {
			return string(out), a.states[s].accept
		}
		b := next[rng.IntN(len(next))]
		out = append(out, b)
		s = a.step(s, b)
	}
	return string(out), false
}

// FuzzCompileSchema: any schema compiles or is refused with an error, never
// a panic; whatever a compiled schema's grammar accepts, or generates by a
// random walk, is valid for the schema.
func FuzzCompileSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"integer","minimum":-3,"maximum":40},"b":{"enum":["x",1,null]}},"required":["a"]}`,
		`{"type":"array","prefixItems":[{"type":"string","pattern":"^[a-c]{2}\\d$"}],"items":{"type":"number","exclusiveMinimum":0},"maxItems":3}`,
		`{"anyOf":[{"type":"string","format":"date"},{"$ref":"#/$defs/x"}],"$defs":{"x":{"type":["boolean","null"]}}}`,
		`{"oneOf":[{"properties":{"k":{"const":1}},"required":["k"]},{"properties":{"k":{"const":2}},"required":["k"]}]}`,
		`{"type":"string","minLength":1,"maxLength":3}`, `{"type":"number","minimum":0,"maximum":1}`, `{}`, `true`,
		`{"type":"object","additionalProperties":{"type":"integer"},"maxProperties":2}`,
	} {
		f.Add(s, `{"a": 1}`, uint64(1))
	}
	f.Fuzz(func(t *testing.T, schema, doc string, seed uint64) {
		if len(schema) > 2000 || len(doc) > 2000 {
			return
		}
		g, err := CompileSchema([]byte(schema))
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) && !strings.HasPrefix(err.Error(), "grammar: ") {
				t.Fatalf("error of an unexpected kind: %v", err)
			}
			return
		}
		if g.Elements() > 1<<16 {
			return
		}
		check := func(text string) {
			err := ValidateJSON([]byte(schema), []byte(text))
			var se *SchemaError
			if errors.As(err, &se) {
				return // the oracle cannot check this schema (a pattern Go's regexp reads differently)
			}
			if err != nil {
				t.Fatalf("the grammar accepts %q, which is not valid: %v", text, err)
			}
		}
		if g.Accepts(doc) {
			check(doc)
		}
		for i := range uint64(4) {
			if text, complete := randomSentence(g, seed+i, 300); complete && !g.automatonForCheck().a.overflow {
				check(text)
			}
		}
	})
}
