package tokenizer

import (
	"strings"
	"unicode/utf8"
)

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// initBPE indexes the merges by the ids of their two sides, so the merge
// loop compares integers instead of building strings. A side or result that
// is not a token gets an id past the vocabulary: llama.cpp merges on strings
// and keeps such intermediate symbols, and so must we.
func (t *Tokenizer) initBPE(merges []string) {
	n := int32(len(t.tokens))
	extra := map[string]int32{}
	intern := func(s string) int32 {
		if id, ok := t.index[s]; ok {
			return id
		}
		if id, ok := extra[s]; ok {
			return id
		}
		id := n + int32(len(extra))
		extra[s] = id
		return id
	}
	t.merges = make(map[uint64]bpeMerge, len(merges))
	for rank, m := range merges {
		// llama.cpp splits at the first space after the first byte, so a
		// merge may start with a space; one without a separator never applies.
		if len(m) < 2 {
			continue
		}
		i := strings.IndexByte(m[1:], ' ')
		if i < 0 {
			continue
		}
		i++
		a, b := m[:i], m[i+1:]
		if b == "" {
			continue
		}
		key := pairKey(intern(a), intern(b))
		if _, dup := t.merges[key]; !dup {
			t.merges[key] = bpeMerge{rank: int32(rank), result: intern(m[:i] + m[i+1:])}
		}
	}
	for c := 0; c < 256; c++ {
		s := string(byteRunes[c])
		t.byteSym[c] = -1
		if id, ok := t.index[s]; ok {
			t.byteSym[c] = id
		} else if id, ok := extra[s]; ok {
			t.byteSym[c] = id
		}
	}
}

// symbol is a run of the current word: mapped[s:e], with id its interned
// string (-1: a character that is in no token and no merge).
type symbol struct {
	id         int32
	prev, next int32
	s, e       int32
}

// bigram is a candidate merge of two neighbouring symbols. For BPE key is
// the merge rank (lower first); for SentencePiece it is the score (higher
// first) and lid holds the merged length.
type bigram struct {
	rank        int32
	score       float32
	left, right int32
	lid, rid    int32
	res         int32
}

// bpeHeap pops the lowest rank, leftmost first, like llama.cpp's queue.
type bpeHeap []bigram

func (h bpeHeap) less(i, j int) bool {
	return h[i].rank < h[j].rank || (h[i].rank == h[j].rank && h[i].left < h[j].left)
}

func (t *Tokenizer) encodeBPE(sc *scratch, text string, out []int32) []int32 {
	p := &sc.pt
	p.reset(text)
	ends := t.pre.split(p, sc)
	prev := 0
	for _, e := range ends {
		w := sc.word[:0]
		for i := prev; i < e; i++ {
			w = appendRune(w, p.cps[i])
		}
		sc.word = w
		prev = e
		out = t.bpeWord(sc, w, out)
	}
	return out
}

func (t *Tokenizer) bpeWord(sc *scratch, word []byte, out []int32) []int32 {
	n := int32(len(t.tokens))
	if len(word) == 1 {
		if id := t.byteSym[word[0]]; id >= 0 && id < n {
			return append(out, id)
		}
	}
	mapped := sc.mapped[:0]
	for _, c := range word {
		mapped = utf8.AppendRune(mapped, byteRunes[c])
	}
	sc.mapped = mapped
	if t.pre.ignore {
		if id, ok := t.index[string(mapped)]; ok {
			return append(out, id)
		}
	}
	syms := sc.syms[:0]
	var off int32
	for i, c := range word {
		l := int32(utf8.RuneLen(byteRunes[c]))
		syms = append(syms, symbol{id: t.byteSym[c], prev: int32(i) - 1, next: int32(i) + 1, s: off, e: off + l})
		off += l
	}
	syms[len(syms)-1].next = -1
	sc.syms = syms

	h := bpeHeap(sc.heap[:0])
	add := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		a, b := syms[l].id, syms[r].id
		if a < 0 || b < 0 {
			return
		}
		if m, ok := t.merges[pairKey(a, b)]; ok {
			heapPush(&h, bigram{rank: m.rank, left: l, right: r, lid: a, rid: b, res: m.result})
		}
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		add(i-1, i)
	}
	for len(h) > 0 {
		bg := heapPop(&h)
		l, r := &syms[bg.left], &syms[bg.right]
		// A bigram is stale once either side has changed; the text of a
		// live symbol changes only by merging, which changes its id.
		if l.s == l.e || r.s == r.e || l.id != bg.lid || r.id != bg.rid {
			continue
		}
		l.e = r.e
		l.id = bg.res
		r.s = r.e
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bg.left
		}
		add(l.prev, bg.left)
		add(bg.left, l.next)
	}
	sc.heap = h

	for i := int32(0); i != -1; i = syms[i].next {
		s := syms[i]
		if s.id >= 0 && s.id < n {
			out = append(out, s.id)
			continue
		}
		// Not a token: fall back to tokens of single bytes of its text,
		// dropping what has none, as llama.cpp does.
		for j := s.s; j < s.e; j++ {
			if id, ok := t.index[string(mapped[j:j+1])]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}
