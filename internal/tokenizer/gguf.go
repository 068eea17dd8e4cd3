package tokenizer

import (
	"fmt"

	"braid/internal/gguf"
)

// VocabFromGGUF reads the tokenizer.ggml.* metadata of m into a Vocab,
// filling in the defaults llama.cpp assumes for keys a file leaves out.
func VocabFromGGUF(m *gguf.Model) (*Vocab, error) {
	v := &Vocab{EOT: -1, EOM: -1, UNK: -1, PAD: -1, SEP: -1}
	var ok bool
	if v.Model, ok = m.String("tokenizer.ggml.model"); !ok {
		return nil, fmt.Errorf("tokenizer: no tokenizer.ggml.model in model file")
	}
	v.Pre, _ = m.String("tokenizer.ggml.pre")
	v.Name, _ = m.String("general.name")
	if v.Tokens, ok = m.Strings("tokenizer.ggml.tokens"); !ok {
		return nil, fmt.Errorf("tokenizer: no tokenizer.ggml.tokens string array in model file")
	}
	if x, present := m.Get("tokenizer.ggml.scores"); present {
		if v.Scores, ok = x.Float32s(); !ok {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.scores is %v, want a number array", x.Type())
		}
	}
	if x, present := m.Get("tokenizer.ggml.token_type"); present {
		if v.Types, ok = x.Int32s(); !ok {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.token_type is %v, want an int32 array", x.Type())
		}
	}
	switch v.Model {
	case "llama":
		v.BOS, v.EOS, v.UNK = 1, 2, 0
		v.AddBOS, v.AddSpacePrefix = true, true
	case "bert":
		// llama.cpp's WPM defaults: BERT's uncased ids. A file's
		// tokenizer.ggml.cls_token_id is not read (llama.cpp does not):
		// [CLS] is the BOS token.
		v.BOS, v.EOS, v.UNK, v.SEP, v.PAD = 101, -1, 100, 102, 0
		v.AddBOS = true
	case "gpt2":
		if v.Merges, ok = m.Strings("tokenizer.ggml.merges"); !ok {
			return nil, fmt.Errorf("tokenizer: no tokenizer.ggml.merges in BPE model file")
		}
		// llama.cpp's defaults for BPE (11 is Falcon's <|endoftext|>).
		v.BOS, v.EOS = 11, 11
		switch v.Pre {
		case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "tekken", "chameleon":
			v.AddBOS = true
		case "glm4", "chatglm-bpe":
			v.BOS = -1
		}
	default:
		return nil, fmt.Errorf("tokenizer: unsupported tokenizer model %q (tokenizer.ggml.model)", v.Model)
	}
	if b, ok := m.Bool("tokenizer.ggml.add_space_prefix"); ok {
		v.AddSpacePrefix = b
	}
	n := uint64(len(v.Tokens))
	for _, k := range []struct {
		key string
		id  *int32
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.eot_token_id", &v.EOT},
		{"tokenizer.ggml.eom_token_id", &v.EOM},
		{"tokenizer.ggml.unknown_token_id", &v.UNK},
		{"tokenizer.ggml.padding_token_id", &v.PAD},
		// llama.cpp's key, misspelt as it is in every GGUF.
		{"tokenizer.ggml.seperator_token_id", &v.SEP},
	} {
		if int64(*k.id) >= int64(n) {
			*k.id = -1
		}
		// An id out of range is ignored and the default kept, as in llama.cpp.
		if x, ok := m.Uint(k.key); ok && x < n {
			*k.id = int32(x)
		}
	}
	if b, ok := m.Bool("tokenizer.ggml.add_bos_token"); ok {
		v.AddBOS = b
	}
	if b, ok := m.Bool("tokenizer.ggml.add_eos_token"); ok {
		v.AddEOS = b
	}
	// BertNormalizer: lowercase by default, accents stripped when lowercasing
	// unless the file says otherwise, as llama.cpp reads them.
	v.Lowercase = true
	if b, ok := m.Bool("tokenizer.ggml.normalizer.lowercase"); ok {
		v.Lowercase = b
	}
	v.StripAccents = v.Lowercase
	if b, ok := m.Bool("tokenizer.ggml.normalizer.strip_accents"); ok {
		v.StripAccents = b
	}
	return v, nil
}

// FromGGUF builds the Tokenizer described by m's metadata.
func FromGGUF(m *gguf.Model) (*Tokenizer, error) {
	v, err := VocabFromGGUF(m)
	if err != nil {
		return nil, err
	}
	return New(v)
}
