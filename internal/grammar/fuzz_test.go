package grammar

import "testing"

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
