package perfmodel

import (
	"encoding/json"
	"strings"
	"testing"

	"braid/internal/modelgen"
)

func TestDescribedRefused(t *testing.T) {
	for _, tc := range []struct{ js, want string }{
		{`{"name":"a","shape":{"Arch":"llama","Layers":100000,"Embd":64,"Vocab":300},"types":{"default":"Q8_0"}}`, "shape.Layers"},
		{`{"name":"a","shape":{"Arch":"llama","Layers":2,"Embd":64,"Vocab":-1},"types":{"default":"Q8_0"}}`, "shape.Vocab"},
		{`{"name":"a","shape":{"Arch":"llama","Layers":2,"Embd":64,"Vocab":300},"types":{"exps":"Q8_0"}}`, "no default"},
		{`{"name":"a","shape":{"Arch":"llama","Layers":2,"Embd":64,"Vocab":300},"types":{"default":"Q9_9"}}`, "types.default"},
		{`{"name":"a","shape":{"Arch":"llama","Layers":2,"Embd":64,"Vocab":300},"types":{"default":"Q8_0","heads":"Q8_0"}}`, "unknown class"},
		{`{"name":"a","shape":{"Arch":"llama","Layers":2,"Embd":64,"Vocab":300},"types":{"mix":"Q3_X"}}`, "neither"},
	} {
		var d Described
		if err := json.Unmarshal([]byte(tc.js), &d); err != nil {
			t.Fatal(err)
		}
		if _, err := d.config(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.js, err, tc.want)
		}
	}
}

// FuzzDescribed: a described model from a user's file is refused or laid
// out, never a panic.
func FuzzDescribed(f *testing.F) {
	f.Add([]byte(`{"name":"a","shape":{"Arch":"llama","Layers":2,"Embd":64,"FF":128,"Heads":2,"KVHeads":1,"Vocab":300},"types":{"default":"Q8_0"}}`))
	f.Add([]byte(`{"name":"m","shape":{"Arch":"qwen3moe","Layers":2,"Embd":64,"Heads":2,"KVHeads":1,"Vocab":300,"Experts":4,"ExpertsUsed":2,"ExpertFF":32},"types":{"mix":"Q4_K_M"}}`))
	f.Add([]byte(`{"shape":{"Arch":"glm-dsa","Layers":1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Described
		if json.Unmarshal(b, &d) != nil {
			return
		}
		c, err := d.config()
		if err != nil {
			return
		}
		if c.Layers*c.Embd > 1<<16 || c.Vocab > 1<<12 || c.Experts*c.ExpertFF > 1<<16 {
			return // valid but slow to lay out: not what fuzzing is for
		}
		modelgen.Plan(c)
	})
}
