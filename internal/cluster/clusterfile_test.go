package cluster

import (
	"strings"
	"testing"
)

const triangle = `# three nodes joined by direct cables
split = "tensor"          # every rank in one group
tensor-split = [2, 1, 1.5]
secret-file = "/etc/braid/secret"
tls-dir = "/etc/braid/tls"
model = "/models/m.gguf"

[[rank]]
model = "/data/m # not a comment.gguf"

[[rank]]
addr = "10.0.1.2:7000"

[[rank]]
addr = "10.0.2.3:7000"
model = "/srv/m.gguf"

[[link]]
from = 1
to = 2
addr = "10.0.3.3"
`

func TestParseFile(t *testing.T) {
	f, err := ParseFile(triangle)
	if err != nil {
		t.Fatal(err)
	}
	if f.Split != "tensor" || f.SecretFile != "/etc/braid/secret" || f.TLSDir != "/etc/braid/tls" || len(f.TensorSplit) != 3 || f.TensorSplit[2] != 1.5 {
		t.Errorf("top-level keys: %+v", f)
	}
	if f.LocalModel() != "/data/m # not a comment.gguf" {
		t.Errorf("rank 0 model %q", f.LocalModel())
	}
	n := f.Nodes()
	if len(n) != 2 || n[0] != (Node{Addr: "10.0.1.2:7000", Model: "/models/m.gguf"}) || n[1] != (Node{Addr: "10.0.2.3:7000", Model: "/srv/m.gguf"}) {
		t.Errorf("nodes %+v", n)
	}
	if f.Links[[2]int{1, 2}] != "10.0.3.3" || len(f.Links) != 1 {
		t.Errorf("links %v", f.Links)
	}
}

func TestParseFileErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"split = tensor\n[[rank]]\n[[rank]]\naddr=\"a:1\"", "line 1: split: want a double-quoted string"},
		{"[[rank]]\n[[rank]]\nport = 3\n", `line 3: unknown key "port" in [[rank]]`},
		{"[[rank]]\n[ranks]\n", "line 2: unknown table [ranks]"},
		{"[[rank]]\n[[rank]]\n", "line 2: rank 1 has no addr"},
		{"[[rank]]\n", "1 [[rank]] tables"},
		{"tensor-split = [1, -2]\n[[rank]]\n[[rank]]\naddr=\"a:1\"", "line 1: tensor-split: item 1"},
		{"tensor-split = [1]\n[[rank]]\n[[rank]]\naddr=\"a:1\"", "tensor-split has 1 weights for 2 ranks"},
		{"split = \"a\"\nsplit = \"b\"\n", "line 2: split is set twice"},
		{"[[rank]]\n[[rank]]\naddr=\"a:1\"\n[[link]]\nfrom = 1\nto = 5\naddr = \"x\"\n", "line 4: link from rank 1 to rank 5"},
		{"[[rank]]\n[[rank]]\naddr=\"a:1\"\n[[rank]]\naddr=\"b:1\"\n[[link]]\nfrom = 2\nto = 1\naddr = \"x\"\n", "the lower rank dials"},
		{"[[rank]]\n[[rank]]\naddr=\"a:1\"\n[[link]]\nfrom = 0\n", "line 4: a [[link]] needs from, to and addr"},
		{"model = \"a\\q\"\n", `line 1: model: unknown escape \q`},
		{"just words\n", "line 1: want key = value"},
	} {
		_, err := ParseFile(tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.src, err, tc.want)
		}
	}
}

func FuzzParseFile(f *testing.F) {
	f.Add(triangle)
	f.Add("[[rank]]\n[[rank]]\naddr = \"127.0.0.1:7000\"\n")
	f.Add("split = \"tensor=2,layer=2\"\ntensor-split=[1,2,3,4]\n")
	f.Add("tls-dir = \"/etc/braid/tls\"\nsecret-file = \"/s\"\n[[rank]]\n[[rank]]\naddr = \"h:1\"\n")
	f.Fuzz(func(t *testing.T, src string) {
		fl, err := ParseFile(src)
		if err != nil {
			return
		}
		if len(fl.Ranks) < 2 {
			t.Fatalf("accepted %d ranks", len(fl.Ranks))
		}
		for k := range fl.Links {
			if k[0] >= k[1] || k[1] >= len(fl.Ranks) {
				t.Fatalf("accepted link %v over %d ranks", k, len(fl.Ranks))
			}
		}
		_ = fl.Nodes()
	})
}
