package plan

import (
	"strings"
	"testing"

	"braid/internal/gguf"
)

func TestChooseLoad(t *testing.T) {
	const gib = 1 << 30
	whole := LoadFacts{File: 2 * gib, Weights: 2 * gib, Other: gib / 2, Usable: 20 * gib}
	tests := []struct {
		name   string
		mode   gguf.LoadMode
		auto   bool
		facts  LoadFacts
		want   gguf.LoadMode
		reason string
	}{
		{"fits", 0, true, whole, gguf.LoadRead, "fit in the 20.0 GiB usable"},
		{"tmpfs", 0, true, func() LoadFacts { f := whole; f.InMemoryFS = true; return f }(), gguf.LoadMmap, "tmpfs"},
		{"shard of a larger file", 0, true, func() LoadFacts { f := whole; f.Weights = gib; return f }(), gguf.LoadMmap, "reads 1.0 GiB of the file's 2.0 GiB"},
		{"memory unknown", 0, true, func() LoadFacts { f := whole; f.Usable = 0; return f }(), gguf.LoadMmap, "unknown"},
		// 2 + 0.5 GiB fits in 2.7 but not with the 0.27 GiB margin.
		{"no margin", 0, true, func() LoadFacts { f := whole; f.Usable = 27 * gib / 10; return f }(), gguf.LoadMmap, "would leave less than"},
		{"bigger than memory", 0, true, func() LoadFacts { f := whole; f.Usable = gib; return f }(), gguf.LoadMmap, "would leave less than"},
		{"asked read", gguf.LoadRead, false, func() LoadFacts { f := whole; f.Usable = gib; return f }(), gguf.LoadRead, "--load-mode read"},
		{"asked mlock", gguf.LoadMlock, false, whole, gguf.LoadMlock, "--load-mode mlock"},
	}
	for _, tc := range tests {
		c := ChooseLoad(tc.mode, tc.auto, tc.facts)
		if c.Mode != tc.want || c.Auto != tc.auto || !strings.Contains(c.Reason, tc.reason) {
			t.Errorf("%s: chose %s (auto %v), want %s; reason %q should contain %q", tc.name, c.Mode, c.Auto, tc.want, c.Reason, tc.reason)
		}
	}
}

func TestLoadFactsHeld(t *testing.T) {
	f := LoadFacts{File: 100, Weights: 60, Other: 7}
	if f.Held(gguf.LoadRead) != 100 || f.Held(gguf.LoadMmap) != 60 || f.Held(gguf.LoadMlock) != 60 || f.Need(gguf.LoadRead) != 107 {
		t.Errorf("on disk: held read %d mmap %d mlock %d, need(read) %d", f.Held(gguf.LoadRead), f.Held(gguf.LoadMmap), f.Held(gguf.LoadMlock), f.Need(gguf.LoadRead))
	}
	f.InMemoryFS = true
	if f.Held(gguf.LoadRead) != 100 || f.Held(gguf.LoadMmap) != 0 || f.Held(gguf.LoadMlock) != 0 {
		t.Errorf("on tmpfs: a copy holds the file again (%d), a mapping nothing more (%d, %d)", f.Held(gguf.LoadRead), f.Held(gguf.LoadMmap), f.Held(gguf.LoadMlock))
	}
}

func TestParseLoadModeFlag(t *testing.T) {
	if m, auto, err := ParseLoadMode("auto"); err != nil || !auto || m != gguf.LoadMmap {
		t.Errorf("auto: %v %v %v", m, auto, err)
	}
	if m, auto, err := ParseLoadMode("mlock"); err != nil || auto || m != gguf.LoadMlock {
		t.Errorf("mlock: %v %v %v", m, auto, err)
	}
	if _, _, err := ParseLoadMode("fast"); err == nil || !strings.Contains(err.Error(), `--load-mode "fast"`) {
		t.Errorf("a bad value: %v, want an error naming it", err)
	}
}
