package tokenizer

import "fmt"

func (t *Tokenizer) initSPM() {
	for c := 0; c < 256; c++ {
		t.byteTok[c] = -1
		if id, ok := t.index[fmt.Sprintf("<0x%02X>", c)]; ok {
			t.byteTok[c] = id
		} else if id, ok := t.index[string([]byte{byte(c)})]; ok {
			t.byteTok[c] = id
		}
	}
}

// spmHeap pops the highest score, leftmost first, like llama.cpp's queue.
type spmHeap []bigram

func (h spmHeap) less(i, j int) bool {
	return h[i].score > h[j].score || (h[i].score == h[j].score && h[i].left < h[j].left)
}

// encodeSPM is llama.cpp's SentencePiece BPE: spaces become "▁", the text is
// cut into UTF-8 characters, and the neighbouring pair whose concatenation is
// the best-scoring token is merged until no pair is a token. What is left
// and is not a token is spelled with byte tokens.
func (t *Tokenizer) encodeSPM(sc *scratch, frag string, prefix bool, out []int32) []int32 {
	const sp = "\u2581"
	buf := sc.text[:0]
	if prefix {
		buf = append(buf, sp...)
	}
	for i := 0; i < len(frag); i++ {
		if frag[i] == ' ' {
			buf = append(buf, sp...)
		} else {
			buf = append(buf, frag[i])
		}
	}
	sc.text = buf
	if len(buf) == 0 {
		return out
	}
	syms := sc.syms[:0]
	for off := 0; off < len(buf); {
		l := min(utf8Len(buf[off]), len(buf)-off)
		i := int32(len(syms))
		syms = append(syms, symbol{prev: i - 1, next: i + 1, s: int32(off), e: int32(off + l)})
		off += l
	}
	syms[len(syms)-1].next = -1
	sc.syms = syms

	h := spmHeap(sc.heap[:0])
	add := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		id, ok := t.index[string(buf[syms[l].s:syms[r].e])]
		if !ok {
			return
		}
		var score float32
		if t.scores != nil {
			score = t.scores[id]
		}
		heapPush(&h, bigram{score: score, left: l, right: r, lid: syms[r].e - syms[l].s})
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		add(i-1, i)
	}
	for len(h) > 0 {
		bg := heapPop(&h)
		l, r := &syms[bg.left], &syms[bg.right]
		// llama.cpp recognises a stale pair by its length alone; a live pair
		// can only have grown, so that is enough.
		if l.s == l.e || r.s == r.e || (l.e-l.s)+(r.e-r.s) != bg.lid {
			continue
		}
		l.e = r.e
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
		if id, ok := t.index[string(buf[s.s:s.e])]; ok {
			out = append(out, id)
			continue
		}
		for j := s.s; j < s.e; j++ {
			if id := t.byteTok[buf[j]]; id >= 0 {
				out = append(out, id)
			} else if t.unk >= 0 {
				out = append(out, t.unk)
			}
		}
	}
	return out
}
