package gguf

import (
	"testing"

	"braid/internal/quant"
)

// FuzzParse feeds arbitrary bytes to the parser. It must never panic, and a
// file it accepts must survive a write and a second parse unchanged, which
// checks that the reader's bounds and the writer's agree.
func FuzzParse(f *testing.F) {
	f.Add(writeBytes(f, sampleWriter(f, 3, 0)))
	f.Add(writeBytes(f, sampleWriter(f, 2, 8)))
	small := NewWriter()
	small.Set("general.architecture", String("llama"))
	small.Set("tokenizer.ggml.tokens", StringArray([]string{"a", "b"}))
	small.Set("nested", Array(TypeArray, []Value{Int32Array([]int32{1})}))
	if err := small.AddTensor("w", quant.Q8_0, []int64{32, 2}, make([]byte, 68)); err != nil {
		f.Fatal(err)
	}
	if err := small.AddTensor("b", quant.F16, []int64{3}, make([]byte, 6)); err != nil {
		f.Fatal(err)
	}
	f.Add(writeBytes(f, small))
	f.Add(header(0, 1).kvU32("general.alignment", 16).b)
	f.Add(header(2, 0).tensor("a", quant.F32, 0, 16).tensor("b", quant.F32, 64, 16).data(128).b)
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.gguf", data)
		if err != nil {
			if file != nil {
				t.Fatalf("Parse returned a file and an error: %v", err)
			}
			return
		}
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			if int64(len(file.TensorData(i))) != ti.Size || ti.Elements() <= 0 {
				t.Fatalf("tensor %q: %d data bytes, size %d, %d elements", ti.Name, len(file.TensorData(i)), ti.Size, ti.Elements())
			}
		}
		for _, kv := range file.KVs {
			_ = kv.Value.String()
		}
		roundTrip(t, file)
	})
}
