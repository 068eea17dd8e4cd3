package hub

import (
	"net/http"
	"strings"
	"testing"
)

const sampleInfo = `{"_id":"x","id":"Qwen/Qwen3-8B-GGUF","private":false,"gated":false,
"sha":"7c41481f57cb95916b40956ab2f0b9b3e2c4b1a6",
"siblings":[{"rfilename":".gitattributes","blobId":"a6344aac8c09253b3b630fb776ae94478aa0275b","size":1519},
{"rfilename":"Qwen3-8B-Q4_K_M.gguf","blobId":"9d4b9e7c4c4e0e6d1e0b5b7b2e1c0b1a1b2c3d4e","size":5027783488,
 "lfs":{"sha256":"D98CF1A1F6A9C1B4E1A1D1C6B2E5F6A7B8C9D0E1F2A3B4C5D6E7F8091A2B3C4D","size":5027783488,"pointerSize":135}}]}`

func TestParseInfo(t *testing.T) {
	info, err := ParseInfo([]byte(sampleInfo))
	if err != nil {
		t.Fatal(err)
	}
	if info.Commit != "7c41481f57cb95916b40956ab2f0b9b3e2c4b1a6" || len(info.Files) != 2 {
		t.Fatalf("%+v", info)
	}
	f := info.Files[1]
	if f.Path != "Qwen3-8B-Q4_K_M.gguf" || f.Size != 5027783488 || f.SHA256 != strings.ToLower("D98CF1A1F6A9C1B4E1A1D1C6B2E5F6A7B8C9D0E1F2A3B4C5D6E7F8091A2B3C4D") {
		t.Errorf("%+v", f)
	}
	if info.Files[0].SHA256 != "" || info.Files[0].Size != 1519 {
		t.Errorf("%+v", info.Files[0])
	}
	for in, msg := range map[string]string{
		`[]`:            "not the hub's JSON",
		`{"sha":"abc"}`: "not a 40-digit hash",
		`{"sha":"7c41481f57cb95916b40956ab2f0b9b3e2c4b1a6","siblings":[{"rfilename":"../x.gguf","size":1}]}`:                                                     `element ".."`,
		`{"sha":"7c41481f57cb95916b40956ab2f0b9b3e2c4b1a6","siblings":[{"rfilename":"/x.gguf","size":1}]}`:                                                       `element ""`,
		`{"sha":"7c41481f57cb95916b40956ab2f0b9b3e2c4b1a6","siblings":[{"rfilename":"x","size":-5}]}`:                                                            "size -5",
		`{"sha":"7c41481f57cb95916b40956ab2f0b9b3e2c4b1a6","siblings":[{"rfilename":"x","lfs":{"sha256":"zz","size":1}}]}`:                                       "not 64 hex",
		`{"sha":"7c41481f57cb95916b40956ab2f0b9b3e2c4b1a6","siblings":[{"rfilename":"x","size":1},{"rfilename":"x","size":1}]}`:                                  "listed twice",
		`{"sha":"7c41481f57cb95916b40956ab2f0b9b3e2c4b1a6","siblings":[{"rfilename":"x","size":2,"lfs":{"sha256":"` + strings.Repeat("a", 64) + `","size":1}}]}`: "LFS size 1",
	} {
		if _, err := ParseInfo([]byte(in)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseInfo(%s): %v, want %q", in, err, msg)
		}
	}
}

func FuzzParseInfo(f *testing.F) {
	f.Add([]byte(sampleInfo))
	f.Add([]byte(`{"sha":"7c41481f57cb95916b40956ab2f0b9b3e2c4b1a6","siblings":[{"rfilename":"a/b-00001-of-00002.gguf","size":3,"lfs":{"sha256":"` + strings.Repeat("b", 64) + `","size":3}}]}`))
	f.Add([]byte(`{"sha":"7c41481f57cb95916b40956ab2f0b9b3e2c4b1a6","siblings":[{"rfilename":"x/../y","size":1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := ParseInfo(data)
		if err != nil {
			return
		}
		if !isCommit(info.Commit) {
			t.Fatalf("commit %q", info.Commit)
		}
		for _, fl := range info.Files {
			if checkRepoPath(fl.Path) != nil || fl.SHA256 != "" && !isSHA256(fl.SHA256) || fl.Size < -1 {
				t.Fatalf("file %+v passed", fl)
			}
		}
		// Whatever the listing, selecting from it never panics, and what
		// it selects is a complete model from the listing.
		for _, q := range []string{"", "Q4_K_M", "x.gguf"} {
			s := Spec{Repo: "o/r", Quant: q}
			if strings.HasSuffix(q, ".gguf") {
				s = Spec{Repo: "o/r", File: q}
			}
			if g, err := Select(info.Files, s, "o/r"); err == nil && (len(g.Files) == 0 || len(g.Missing) > 0) {
				t.Fatalf("Select gave %+v", g)
			}
		}
	})
}

func TestCheckLinked(t *testing.T) {
	d := &download{name: "m.gguf", size: 10, sha: strings.Repeat("a", 64)}
	for _, c := range []struct {
		size, etag, msg string
	}{
		{"10", `"` + strings.Repeat("a", 64) + `"`, ""},
		{"", "", ""},
		{"11", "", "with 11 bytes, its listing says 10"},
		{"10", `W/"` + strings.Repeat("b", 64) + `"`, "as " + strings.Repeat("b", 64)},
		{"10", `"not-a-hash"`, ""}, // a CDN's own ETag: not the hub's claim
	} {
		h := http.Header{}
		if c.size != "" {
			h.Set("X-Linked-Size", c.size)
		}
		if c.etag != "" {
			h.Set("X-Linked-Etag", c.etag)
		}
		err := d.checkLinked(h)
		if (c.msg == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.msg) {
			t.Errorf("size %q etag %q: %v, want %q", c.size, c.etag, err, c.msg)
		}
	}
}

func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes 5-9/*", "bytes -1/2", "bytes 1-2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start, total, err := contentRange(s)
		if err == nil && (total < -1 || start < 0 || !strings.HasPrefix(s, "bytes ")) {
			t.Fatalf("contentRange(%q) = %d, %d", s, start, total)
		}
	})
}
