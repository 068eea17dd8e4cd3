// Package tokenizer turns text into token ids and back the way llama.cpp
// does for a GGUF model: SentencePiece-style vocabularies
// (tokenizer.ggml.model = "llama"), byte-level BPE ("gpt2") with the
// pre-tokenizer named by tokenizer.ggml.pre, and BERT's WordPiece ("bert").
// The ids are meant to be identical to llama.cpp's llama_tokenize, so a prompt costs the same tokens
// and a cached prefix matches across implementations.
package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Token types as stored in tokenizer.ggml.token_type.
const (
	TypeNormal      = 1
	TypeUnknown     = 2
	TypeControl     = 3
	TypeUserDefined = 4
	TypeUnused      = 5
	TypeByte        = 6
)

// Token attributes, a bit set like llama.cpp's llama_token_attr: llama.cpp
// adds bits to what the file says (control for end-of-turn tokens, strip
// flags for some models), so a type alone is not enough.
const (
	attrUnknown uint16 = 1 << iota
	attrUnused
	attrNormal
	attrControl
	attrUserDefined
	attrByte
	attrNormalized
	attrLStrip
	attrRStrip
)

// Vocab is everything a Tokenizer is built from, as read from GGUF metadata
// (tokenizer.ggml.*). New takes the fields literally; FromGGUF fills in
// llama.cpp's defaults for keys a file leaves out.
type Vocab struct {
	// Model is tokenizer.ggml.model: "llama" (SentencePiece), "gpt2"
	// (byte-level BPE) or "bert" (WordPiece).
	Model string
	// Pre is tokenizer.ggml.pre, the BPE pre-tokenizer; ignored for "llama".
	Pre string
	// Name is general.name; llama.cpp keys a few per-model fixes on it.
	Name string
	// Tokens, Scores and Types are indexed by token id. Scores and Types may
	// be nil (all zero, all normal).
	Tokens []string
	Scores []float32
	Types  []int32
	// Merges are the BPE merges "left right", highest priority first.
	Merges []string
	// Special token ids; -1 means none. EOT and EOM of -1 are looked up by
	// their usual texts, as llama.cpp does.
	// SEP is WordPiece's separator ([SEP]); BERT's BOS is its [CLS].
	BOS, EOS, EOT, EOM, UNK, PAD, SEP int32
	// AddBOS and AddEOS say whether Encode with addSpecial adds them. A
	// WordPiece vocabulary ignores both: llama.cpp's WPM tokenizer adds
	// [CLS] (BOS) and [SEP] with add_special whatever the file says
	// (tokenizer.ggml.add_bos_token / add_sep_token), and so does braid.
	AddBOS, AddEOS bool
	// Lowercase and StripAccents are WordPiece's BertNormalizer options
	// (tokenizer.ggml.normalizer.*).
	Lowercase, StripAccents bool
	// AddSpacePrefix prepends a space to SentencePiece text (and strips it
	// again when decoding).
	AddSpacePrefix bool
}

// Tokenizer encodes and decodes text for one vocabulary. It is safe for
// concurrent use.
type Tokenizer struct {
	spm    bool
	wpm    bool
	pre    *preTokenizer
	tokens []string
	scores []float32
	attrs  []uint16
	index  map[string]int32

	// BPE: merges keyed by the interned ids of both sides. Strings that
	// occur in merges but are not tokens get ids from len(tokens) on, so
	// merging behaves exactly as on strings.
	merges  map[uint64]bpeMerge
	byteSym [256]int32 // BPE: interned id of each byte's GPT-2 character
	byteTok [256]int32 // SPM: the <0xXX> token for each byte

	bos, eos, eot, eom, unk, pad int32
	addBOS, addEOS, addSpace     bool

	// WordPiece: the separator, the normalizer and the longest token in
	// bytes (bounds the greedy match).
	sep                     int32
	lowercase, stripAccents bool
	maxTokLen               int

	eog     map[int32]bool
	special []int32 // control, user-defined and unknown tokens, longest first
	pieces  []string

	scratch sync.Pool
}

type bpeMerge struct{ rank, result int32 }

// New builds a Tokenizer from v. It fails on an unknown model or
// pre-tokenizer name rather than guessing.
func New(v *Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: empty vocabulary")
	}
	if v.Scores != nil && len(v.Scores) < n {
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) < n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(v.Types), n)
	}
	t := &Tokenizer{
		tokens:   v.Tokens,
		scores:   v.Scores,
		attrs:    make([]uint16, n),
		index:    make(map[string]int32, n),
		bos:      v.BOS,
		eos:      v.EOS,
		eot:      v.EOT,
		eom:      v.EOM,
		unk:      v.UNK,
		pad:      v.PAD,
		addBOS:   v.AddBOS,
		addEOS:   v.AddEOS,
		addSpace: v.AddSpacePrefix,
		sep:      v.SEP,
	}
	switch v.Model {
	case "llama":
		t.spm = true
	case "bert":
		t.wpm = true
		t.addBOS, t.addEOS, t.addSpace = true, false, false
		t.lowercase, t.stripAccents = v.Lowercase, v.StripAccents
	case "gpt2":
		pre, err := lookupPre(v.Pre)
		if err != nil {
			return nil, err
		}
		t.pre = pre
	default:
		return nil, fmt.Errorf("tokenizer: unsupported tokenizer model %q (tokenizer.ggml.model)", v.Model)
	}
	copied := false
	for i, s := range v.Tokens {
		if s == "" {
			// llama.cpp renames empty tokens so they stay unique and unmatched.
			if !copied {
				t.tokens = append([]string(nil), v.Tokens...)
				copied = true
			}
			s = fmt.Sprintf("[EMPTY_%d]", i)
			t.tokens[i] = s
		}
		if j, dup := t.index[s]; dup {
			return nil, fmt.Errorf("tokenizer: duplicate token %q at ids %d and %d", s, j, i)
		}
		t.index[s] = int32(i)
		a := attrNormal
		if v.Types != nil {
			switch v.Types[i] {
			case TypeNormal:
			case TypeUnknown:
				a = attrUnknown
			case TypeControl:
				a = attrControl
			case TypeUserDefined:
				a = attrUserDefined
			case TypeUnused:
				a = attrUnused
			case TypeByte:
				a = attrByte
			default:
				a = 0
			}
		}
		t.attrs[i] = a
	}
	for _, id := range []*int32{&t.bos, &t.eos, &t.eot, &t.eom, &t.unk, &t.pad, &t.sep} {
		if *id >= int32(n) || *id < 0 {
			*id = -1
		}
	}
	if t.wpm && t.bos < 0 {
		return nil, fmt.Errorf("tokenizer: bert vocabulary has no [CLS] token (tokenizer.ggml.bos_token_id, default 101, of %d tokens)", n)
	}
	if t.addBOS && t.bos < 0 {
		return nil, fmt.Errorf("tokenizer: add_bos_token is set but there is no BOS token")
	}
	if t.addEOS && t.eos < 0 {
		return nil, fmt.Errorf("tokenizer: add_eos_token is set but there is no EOS token")
	}
	if t.wpm && t.sep < 0 {
		return nil, fmt.Errorf("tokenizer: bert vocabulary has no separator token (tokenizer.ggml.seperator_token_id, default 102, of %d tokens)", n)
	}
	switch {
	case t.spm:
		t.initSPM()
	case t.wpm:
		for _, s := range t.tokens {
			t.maxTokLen = max(t.maxTokLen, len(s))
		}
	default:
		t.initBPE(v.Merges)
	}
	t.initSpecial(v)
	t.pieces = make([]string, n)
	for i := range t.pieces {
		t.pieces[i] = t.piece(int32(i))
	}
	return t, nil
}

// markControl gives a token llama.cpp treats as end-of-something the control
// attribute, as llama.cpp does when a converter forgot to.
func (t *Tokenizer) markControl(id int32) {
	t.attrs[id] |= attrControl
}

// initSpecial reproduces llama.cpp's fix-ups of special tokens: end-of-turn
// detection by text, the end-of-generation set, per-model strip flags, and
// the list of tokens split out of text before tokenizing.
func (t *Tokenizer) initSpecial(v *Vocab) {
	// llama.cpp takes whichever listed text its hash map yields first; we
	// take the first in list order, which puts the specific end-of-turn
	// names (<|eot_id|>) before generic ones (<|endoftext|>).
	detect := func(cur int32, names ...string) int32 {
		if cur >= 0 {
			return cur
		}
		for _, s := range names {
			if id, ok := t.index[s]; ok {
				t.markControl(id)
				return id
			}
		}
		return -1
	}
	t.eot = detect(t.eot, "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>")
	t.eom = detect(t.eom, "<|eom_id|>")
	fimPad := detect(-1, "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]")
	fimRep := detect(-1, "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>")
	fimSep := detect(-1, "<|file_sep|>")

	t.eog = map[int32]bool{}
	for _, id := range []int32{fimPad, fimRep, fimSep} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	for _, s := range []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
		"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
		"[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~["} {
		if id, ok := t.index[s]; ok {
			t.eog[id] = true
			t.markControl(id)
		}
	}
	for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		if id, ok := t.index[s]; ok {
			t.attrs[id] = attrUserDefined
		}
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	// gpt-oss and solar-open end a message with <|end|> but keep generating.
	has := func(s string) bool { id, ok := t.index[s]; return ok && t.eog[id] }
	if end, ok := t.index["<|end|>"]; ok && t.eog[end] &&
		((has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>"))) {
		delete(t.eog, end)
		t.attrs[end] = attrUserDefined
	}
	if s, ok := t.index["</s>"]; ok && t.eog[s] && has("<|tool_response>") {
		delete(t.eog, s)
		t.attrs[s] = attrNormal
	}

	for id, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special = append(t.special, int32(id))
		}
	}
	sort.SliceStable(t.special, func(i, j int) bool {
		return len(t.tokens[t.special[i]]) > len(t.tokens[t.special[j]])
	})

	name := strings.ToLower(v.Name)
	switch {
	case strings.Contains(v.Pre, "jina-v2-de") || strings.Contains(v.Pre, "jina-v2-es") || strings.Contains(v.Pre, "jina-v2-code"):
		if id, ok := t.index["<mask>"]; ok {
			t.attrs[id] |= attrLStrip
		}
	case strings.Contains(name, "phi-3") || strings.Contains(name, "phi3"):
		for _, id := range t.special {
			t.attrs[id] |= attrRStrip
		}
		if id, ok := t.index["</s>"]; ok {
			t.attrs[id] |= attrRStrip
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if id, ok := t.index[s]; ok {
				t.attrs[id] &^= attrRStrip
			}
		}
	}
}

// fragment is a piece of the input: raw text [s, e) or a special token.
type fragment struct {
	tok  int32 // -1 for text
	s, e int
}

func isCSpace(b byte) bool { return b == ' ' || (b >= '\t' && b <= '\r') }

// partition splits special-token text out of the input, longest tokens
// first, as llama.cpp's tokenizer_st_partition. User-defined tokens are split
// out even without parseSpecial (Hugging Face does the same); control and
// unknown tokens only with it.
func (t *Tokenizer) partition(text string, parseSpecial bool, frags, tmp []fragment) []fragment {
	frags = append(frags[:0], fragment{-1, 0, len(text)})
	for _, id := range t.special {
		a := t.attrs[id]
		if !parseSpecial && a&(attrControl|attrUnknown) != 0 {
			continue
		}
		tt := t.tokens[id]
		if !strings.Contains(text, tt) {
			continue
		}
		tmp = tmp[:0]
		for _, f := range frags {
			if f.tok >= 0 {
				tmp = append(tmp, f)
				continue
			}
			s, e := f.s, f.e
			for s < e {
				i := strings.Index(text[s:e], tt)
				if i < 0 {
					break
				}
				m := s + i
				l := m
				if a&attrLStrip != 0 {
					for l > s && isCSpace(text[l-1]) {
						l--
					}
				}
				if l > s {
					tmp = append(tmp, fragment{-1, s, l})
				}
				tmp = append(tmp, fragment{id, m, m + len(tt)})
				s = m + len(tt)
				if a&attrRStrip != 0 {
					for s < e && isCSpace(text[s]) {
						s++
					}
				}
			}
			if s < e {
				tmp = append(tmp, fragment{-1, s, e})
			}
		}
		frags, tmp = tmp, frags
	}
	return frags
}

type scratch struct {
	frags, tmp  []fragment
	pt          preText
	ends, ends2 []int
	word        []byte
	mapped      []byte
	syms        []symbol
	heap        []bigram
	text        []byte
}

func (t *Tokenizer) getScratch() *scratch {
	if s, ok := t.scratch.Get().(*scratch); ok {
		return s
	}
	return &scratch{}
}

// Encode tokenizes text. With addSpecial it adds BOS and EOS where the
// vocabulary asks for them; with parseSpecial, text spelling a control token
// (say "<|im_start|>") becomes that token instead of being tokenized as
// text.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	sc := t.getScratch()
	defer t.scratch.Put(sc)
	var out []int32
	if text != "" {
		sc.frags = t.partition(text, parseSpecial, sc.frags, sc.tmp)
	} else {
		sc.frags = sc.frags[:0]
	}
	if addSpecial && t.addBOS {
		out = append(out, t.bos)
	}
	prevSpecial := true
	for _, f := range sc.frags {
		if f.tok >= 0 {
			out = append(out, f.tok)
			prevSpecial = true
			continue
		}
		switch {
		case t.spm:
			out = t.encodeSPM(sc, text[f.s:f.e], t.addSpace && prevSpecial, out)
		case t.wpm:
			out = t.encodeWPM(sc, text[f.s:f.e], out)
		default:
			out = t.encodeBPE(sc, text[f.s:f.e], out)
		}
		prevSpecial = false
	}
	if addSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	if addSpecial && t.wpm {
		out = append(out, t.sep)
	}
	return out
}

// BOS returns the beginning-of-sequence token id, or -1.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS returns the end-of-sequence token id, or -1.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT returns the end-of-turn token id, or -1.
func (t *Tokenizer) EOT() int32 { return t.eot }

// UNK returns the unknown token id, or -1.
func (t *Tokenizer) UNK() int32 { return t.unk }

// SEP returns WordPiece's separator token id, or -1.
func (t *Tokenizer) SEP() int32 { return t.sep }

// PAD returns the padding token id, or -1.
func (t *Tokenizer) PAD() int32 { return t.pad }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode with addSpecial appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// IsEOG reports whether id ends generation: EOS, EOT, EOM and the other
// end-of-turn tokens llama.cpp recognises by their text.
func (t *Tokenizer) IsEOG(id int32) bool { return id >= 0 && t.eog[id] }

// EOGs returns the end-of-generation ids in increasing order.
func (t *Tokenizer) EOGs() []int32 {
	ids := make([]int32, 0, len(t.eog))
	for id := range t.eog {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// TokenText returns the vocabulary entry of id as stored (with "▁" or GPT-2
// byte characters), or "" for an id out of range.
func (t *Tokenizer) TokenText(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// TokenID returns the id of a vocabulary entry spelled exactly as stored.
func (t *Tokenizer) TokenID(text string) (int32, bool) {
	id, ok := t.index[text]
	return id, ok
}

// IsControl reports whether id is a control token (rendered only on
// request).
func (t *Tokenizer) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.attrs) && t.attrs[id]&attrControl != 0
}

// Model returns "spm", "bpe" or "wpm".
func (t *Tokenizer) Model() string {
	switch {
	case t.spm:
		return "spm"
	case t.wpm:
		return "wpm"
	}
	return "bpe"
}

// PreName returns the pre-tokenizer in use: "default" when a BPE file names
// none (llama.cpp falls back the same way, with a warning about quality),
// and "" for SentencePiece and WordPiece, which have none.
func (t *Tokenizer) PreName() string {
	if t.pre == nil {
		return ""
	}
	return t.pre.name
}
