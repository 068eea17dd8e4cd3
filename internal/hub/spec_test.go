package hub

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	good := []struct {
		in   string
		want Spec
	}{
		{"Qwen/Qwen3-8B-GGUF", Spec{Repo: "Qwen/Qwen3-8B-GGUF"}},
		{"Qwen/Qwen3-8B-GGUF:Q4_K_M", Spec{Repo: "Qwen/Qwen3-8B-GGUF", Quant: "Q4_K_M"}},
		{"unsloth/Qwen3-235B-A22B-GGUF:UD-Q4_K_XL", Spec{Repo: "unsloth/Qwen3-235B-A22B-GGUF", Quant: "UD-Q4_K_XL"}},
		{"ggml-org/gpt-oss-120b-GGUF@v1.0:mxfp4", Spec{Repo: "ggml-org/gpt-oss-120b-GGUF", Revision: "v1.0", Quant: "mxfp4"}},
		{"a/b@refs/pr/1:Q8_0/b-00001-of-00002.gguf", Spec{Repo: "a/b", Revision: "refs/pr/1", File: "Q8_0/b-00001-of-00002.gguf"}},
		{"a.b/c_d:model.GGUF", Spec{Repo: "a.b/c_d", File: "model.GGUF"}},
	}
	for _, c := range good {
		got, err := ParseSpec(c.in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseSpec(%q) = %+v, want %+v", c.in, got, c.want)
		}
		if got.String() != c.in {
			t.Errorf("ParseSpec(%q).String() = %q", c.in, got.String())
		}
	}
	bad := []struct{ in, msg string }{
		{"", "not ORG/NAME"},
		{"model.gguf", "not ORG/NAME"},
		{"a/b/c", "not ORG/NAME"},
		{"/abs/path.gguf", "not ORG/NAME"},
		{"/abs", "1 to 96"},
		{"./x", "start with a letter"},
		{"a--b/c", `"--"`},
		{"a/b..c", `".."`},
		{"a/b:", "quantization"},
		{"a/b:Q4 K", "not allowed"},
		{"a/b@:Q4_K_M", "revision"},
		{"a/b@../x", "element"},
		{"a/b:../x.gguf", "element"},
		{"a/b:x/./y.gguf", "element"},
		{"a/b:x\\y.gguf", "not allowed"},
		{"a/b c", "not allowed"},
	}
	for _, c := range bad {
		_, err := ParseSpec(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), strconv.Quote(c.in)) {
			t.Errorf("ParseSpec(%q) = %v, want an error naming the input and saying %q", c.in, err, c.msg)
		}
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"Qwen/Qwen3-8B-GGUF:Q4_K_M", "a/b@main:x.gguf", "a/b@refs/pr/1", "a/b:", "a/b@", ":", "@", "a/b:Q4_K_M/x.gguf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseSpec(s)
		if err != nil {
			return
		}
		// What parses names a repository, a revision and a file that stay
		// inside the cache, and prints back to itself.
		if checkRepo(spec.Repo) != nil || spec.Revision != "" && checkRevision(spec.Revision) != nil ||
			spec.File != "" && checkRepoPath(spec.File) != nil || spec.File != "" && spec.Quant != "" {
			t.Fatalf("ParseSpec(%q) = %+v, which does not check", s, spec)
		}
		again, err := ParseSpec(spec.String())
		if err != nil || again != spec {
			t.Fatalf("ParseSpec(%q) = %+v; its String %q parses to %+v, %v", s, spec, spec.String(), again, err)
		}
		for _, p := range []string{spec.Repo, spec.Revision, spec.File} {
			if strings.Contains("/"+p+"/", "/../") {
				t.Fatalf("ParseSpec(%q) lets %q through", s, p)
			}
		}
	})
}

func TestQuantLabel(t *testing.T) {
	for in, want := range map[string]string{
		"Qwen3-8B-Q4_K_M.gguf":                                      "Q4_K_M",
		"qwen3-8b-q8_0.gguf":                                        "Q8_0",
		"Q4_K_M/Qwen3-235B-A22B-Q4_K_M-00001-of-00003.gguf":         "Q4_K_M",
		"UD-Q4_K_XL/Qwen3-235B-A22B-UD-Q4_K_XL-00002-of-00003.gguf": "UD-Q4_K_XL",
		"gpt-oss-120b-mxfp4-00001-of-00003.gguf":                    "MXFP4",
		"llama-2-7b.Q5_K_S.gguf":                                    "Q5_K_S",
		"Model-IQ4_XS.gguf":                                         "IQ4_XS",
		"Model-BF16.gguf":                                           "BF16",
		"model.gguf":                                                "",
		"BF16/model-00001-of-00002.gguf":                            "BF16",
	} {
		if got := QuantLabel(in); got != want {
			t.Errorf("QuantLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func files(paths ...string) []File {
	var out []File
	for _, p := range paths {
		out = append(out, File{Path: p, Size: 10})
	}
	return out
}

func TestSelect(t *testing.T) {
	repo := files(
		"README.md",
		"Qwen3-8B-Q4_K_M.gguf",
		"Qwen3-8B-Q8_0.gguf",
		"Qwen3-8B-UD-Q4_K_XL.gguf",
		"mmproj-Qwen3-8B-F16.gguf",
		"BF16/Qwen3-8B-BF16-00002-of-00002.gguf",
		"BF16/Qwen3-8B-BF16-00001-of-00002.gguf",
		"Q2_K/Qwen3-8B-Q2_K-00001-of-00003.gguf",
		"Q2_K/Qwen3-8B-Q2_K-00003-of-00003.gguf",
	)
	pick := func(spec string) ([]string, error) {
		s, err := ParseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		g, err := Select(repo, s, "org/repo")
		if err != nil {
			return nil, err
		}
		var p []string
		for _, f := range g.Files {
			p = append(p, f.Path)
		}
		return p, nil
	}
	for spec, want := range map[string]string{
		"org/repo":            "Qwen3-8B-Q4_K_M.gguf",
		"org/repo:q4_k_m":     "Qwen3-8B-Q4_K_M.gguf",
		"org/repo:Q8_0":       "Qwen3-8B-Q8_0.gguf",
		"org/repo:Q4_K_XL":    "Qwen3-8B-UD-Q4_K_XL.gguf",
		"org/repo:UD-Q4_K_XL": "Qwen3-8B-UD-Q4_K_XL.gguf",
		"org/repo:BF16":       "BF16/Qwen3-8B-BF16-00001-of-00002.gguf BF16/Qwen3-8B-BF16-00002-of-00002.gguf",
		"org/repo:Qwen3-8B-BF16-00002-of-00002.gguf": "BF16/Qwen3-8B-BF16-00001-of-00002.gguf BF16/Qwen3-8B-BF16-00002-of-00002.gguf",
		"org/repo:Qwen3-8B-Q8_0.gguf":                "Qwen3-8B-Q8_0.gguf",
	} {
		got, err := pick(spec)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("Select(%s) = %v, %v; want %s", spec, got, err, want)
		}
	}
	for spec, msg := range map[string]string{
		"org/repo:Q5_K_M":       "quantizations there: BF16, Q2_K, Q4_K_M, Q8_0, UD-Q4_K_XL",
		"org/repo:Q2_K":         "part(s) [2] are missing",
		"org/repo:Q4_K":         "no Q4_K model",
		"org/repo:nothing.gguf": `no file "nothing.gguf"`,
		"org/repo:F16":          "no F16 model", // the projector is not a model
	} {
		if _, err := pick(spec); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("Select(%s): %v, want an error saying %q", spec, err, msg)
		}
	}
	// Several models and no Q4_K_M: say which there are.
	if _, err := Select(files("a-Q8_0.gguf", "a-Q6_K.gguf"), Spec{Repo: "o/r"}, "o/r"); err == nil || !strings.Contains(err.Error(), "Q6_K, Q8_0") {
		t.Errorf("no default: %v", err)
	}
	// One model: no label needed.
	if g, err := Select(files("model.gguf", "config.json"), Spec{Repo: "o/r"}, "o/r"); err != nil || g.Name() != "model.gguf" || g.Label() != "model.gguf" {
		t.Errorf("single model: %v, %v", g, err)
	}
	// Two files with the same label: ambiguous.
	if _, err := Select(files("a-Q8_0.gguf", "b-Q8_0.gguf"), Spec{Repo: "o/r", Quant: "Q8_0"}, "o/r"); err == nil || !strings.Contains(err.Error(), "o/r:FILE") {
		t.Errorf("ambiguous: %v", err)
	}
	if _, err := Select(files("README.md"), Spec{Repo: "o/r"}, "o/r"); err == nil || !strings.Contains(err.Error(), "no GGUF") {
		t.Errorf("no GGUF: %v", err)
	}
}

func TestContainsWord(t *testing.T) {
	for _, c := range []struct {
		s, w string
		want bool
	}{
		{"x-Q4_K.gguf", "q4_k", true},
		{"x-Q4_K_M.gguf", "Q4_K", false},
		{"x-IQ4_K.gguf", "Q4_K", false},
		{"Q4_K", "Q4_K", true},
		{"aQ4_K Q4_K", "Q4_K", true},
	} {
		if got := containsWord(c.s, c.w); got != c.want {
			t.Errorf("containsWord(%q, %q) = %v", c.s, c.w, got)
		}
	}
}
