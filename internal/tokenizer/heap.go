package tokenizer

// orderedHeap is a binary heap of bigrams whose order is its less method:
// BPE pops the lowest merge rank, SentencePiece the highest score, both
// leftmost first. One implementation, two orders; the type parameter keeps
// less a direct call in the merge loop.
type orderedHeap interface {
	~[]bigram
	less(i, j int) bool
}

func heapPush[H orderedHeap](h *H, b bigram) {
	*h = append(*h, b)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func heapPop[H orderedHeap](h *H) bigram {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		m := l
		if r := l + 1; r < len(q) && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}
