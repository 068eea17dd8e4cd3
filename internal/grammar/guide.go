package grammar

import (
	"errors"
	"math"
	"math/bits"
	"slices"
	"sync"

	"braid/internal/sample"
)

// Vocab is a model's vocabulary as the bytes each token writes, arranged as
// a trie in depth-first order for masking. Build it once per model; it is
// immutable and safe for concurrent use.
type Vocab struct {
	size   int
	pieces []string
	eog    []int32 // sorted
	isEOG  []bool

	// The trie, one entry per node in depth-first order: the byte leading
	// to it, its depth (1 for the root's children), the index just past
	// its subtree, and the tokens whose bytes end there
	// (toks[tokStart[i]:tokStart[i+1]]).
	nodeByte []byte
	depth    []uint16
	skip     []int32
	tokStart []int32
	toks     []int32
	maxDepth int

	// bytesCovered is set when every byte is the whole piece of some
	// token: any text can then be written a byte a token, so a state's
	// distance to acceptance in tokens is at most its distance in bytes.
	bytesCovered bool
}

// maxPiece bounds the bytes of one token in the trie; no vocabulary comes
// near it, and a longer token is simply never allowed.
const maxPiece = 1 << 12

// NewVocab builds the trie. pieces[id] is the text token id writes; an
// empty piece (a control token that writes nothing) is never allowed. The
// eog tokens end generation: they are allowed exactly where the grammar
// may end, whatever their pieces.
func NewVocab(pieces []string, eog []int32) *Vocab {
	v := &Vocab{size: len(pieces), pieces: pieces, isEOG: make([]bool, len(pieces))}
	for _, id := range eog {
		if id >= 0 && int(id) < len(pieces) && !v.isEOG[id] {
			v.isEOG[id] = true
			v.eog = append(v.eog, id)
		}
	}
	slices.Sort(v.eog)
	ids := make([]int32, 0, len(pieces))
	for id, p := range pieces {
		if p != "" && len(p) <= maxPiece && !v.isEOG[id] {
			ids = append(ids, int32(id))
		}
	}
	slices.SortFunc(ids, func(a, b int32) int {
		if c := compareStrings(pieces[a], pieces[b]); c != 0 {
			return c
		}
		return int(a) - int(b)
	})
	var path []int32 // node index at each depth of the current piece
	prev := ""
	for _, id := range ids {
		p := pieces[id]
		l := 0
		for l < len(prev) && l < len(p) && prev[l] == p[l] {
			l++
		}
		for len(path) > l {
			v.skip[path[len(path)-1]] = int32(len(v.nodeByte))
			path = path[:len(path)-1]
		}
		for d := l; d < len(p); d++ {
			path = append(path, int32(len(v.nodeByte)))
			v.nodeByte = append(v.nodeByte, p[d])
			v.depth = append(v.depth, uint16(d+1))
			v.skip = append(v.skip, 0)
			v.tokStart = append(v.tokStart, int32(len(v.toks)))
		}
		v.toks = append(v.toks, id)
		v.maxDepth = max(v.maxDepth, len(p))
		prev = p
	}
	for _, n := range path {
		v.skip[n] = int32(len(v.nodeByte))
	}
	v.tokStart = append(v.tokStart, int32(len(v.toks)))
	var single [256]bool
	n := 0
	for _, id := range ids {
		if p := pieces[id]; len(p) == 1 && !single[p[0]] {
			single[p[0]] = true
			n++
		}
	}
	v.bytesCovered = n == 256
	return v
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Size is the number of token ids.
func (v *Vocab) Size() int { return v.size }

// Nodes is the number of trie nodes.
func (v *Vocab) Nodes() int { return len(v.nodeByte) }

// mask is the set of tokens allowed in one state, in whichever form is
// smallest: the allowed ids, the refused ids, or a bit per token.
type mask struct {
	mode  maskMode
	ids   []int32 // sorted: allowed (modeAllow) or refused (modeDeny)
	bits  []uint64
	count int // allowed tokens
	// maxSuccBytes is the most bytes to acceptance from any state an
	// allowed token leads to (closure.go).
	maxSuccBytes int32
}

type maskMode uint8

const (
	modeAllow maskMode = iota
	modeDeny
	modeBits
)

func (m *mask) allows(id int32) bool {
	switch m.mode {
	case modeAllow:
		_, ok := slices.BinarySearch(m.ids, id)
		return ok
	case modeDeny:
		_, ok := slices.BinarySearch(m.ids, id)
		return !ok
	}
	return m.bits[id>>6]&(1<<(id&63)) != 0
}

func (m *mask) first() int32 {
	switch m.mode {
	case modeAllow:
		return m.ids[0]
	case modeDeny:
		for i := int32(0); ; i++ {
			if !m.allows(i) {
				continue
			}
			return i
		}
	}
	for w, x := range m.bits {
		if x != 0 {
			return int32(w*64 + bits.TrailingZeros64(x))
		}
	}
	return -1
}

func (m *mask) bytes() int { return 4*len(m.ids) + 8*len(m.bits) + 64 }

// maxMaskBytes bounds one guide's cached masks; past it the cache starts
// over (masks are recomputed as states recur).
const maxMaskBytes = 64 << 20

// Guide is a grammar bound to a vocabulary: the automaton and, per state,
// the mask of allowed tokens, both built as generation reaches them and
// kept for every sequence using the guide. It is safe for concurrent use;
// a server keeps one per distinct grammar.
type Guide struct {
	g *Grammar
	v *Vocab

	mu        sync.Mutex
	a         *automaton
	masks     map[int32]*mask
	maskBytes int
	stk       []int32
	scratch   []uint64

	// Closing within a budget (closure.go): known ways to close, the
	// successors of expanded states, the states whose shortest text was
	// tried, and the masks of forced closures.
	close       map[int32]closeEntry
	succs       map[int32][]succ
	pathTried   map[int32]struct{}
	forced      map[[2]int32]*mask
	forcedBytes int
	textBuf     []byte
	// MinTokens' answer, computed once.
	minKnown  bool
	minTokens int
	minOK     bool
}

// NewGuide binds g to v.
func NewGuide(g *Grammar, v *Vocab) *Guide {
	return &Guide{g: g, v: v, a: newAutomaton(g), masks: map[int32]*mask{},
		close: map[int32]closeEntry{}, succs: map[int32][]succ{}, pathTried: map[int32]struct{}{}, forced: map[[2]int32]*mask{}}
}

// Grammar is the guide's grammar.
func (gd *Guide) Grammar() *Grammar { return gd.g }

// States is how many automaton states have been built so far.
func (gd *Guide) States() int {
	gd.mu.Lock()
	defer gd.mu.Unlock()
	return len(gd.a.states)
}

// ErrTooAmbiguous is Prepare's error for a grammar whose parse keeps more
// alternatives open at once than the matcher follows.
var ErrTooAmbiguous = errors.New("grammar: too ambiguous to follow (it keeps thousands of parses open at once; nested optional repetitions do that)")

// Prepare computes the mask of the start state: a grammar that is too
// ambiguous to follow there, or that allows no token at all at the start,
// is refused before generation begins.
func (gd *Guide) Prepare() error {
	gd.mu.Lock()
	defer gd.mu.Unlock()
	m := gd.maskFor(gd.a.start)
	switch {
	case gd.a.overflow:
		return ErrTooAmbiguous
	case m.count == 0:
		return errors.New("grammar: no token of the vocabulary can start a sentence of the grammar")
	}
	return nil
}

// maskFor returns state s's mask, computing it on first use. The caller
// holds mu.
func (gd *Guide) maskFor(s int32) *mask {
	if m, ok := gd.masks[s]; ok {
		return m
	}
	m := gd.computeMask(s)
	if gd.maskBytes += m.bytes(); gd.maskBytes > maxMaskBytes {
		clear(gd.masks)
		gd.maskBytes = m.bytes()
	}
	gd.masks[s] = m
	return m
}

// computeMask walks the vocabulary trie through the automaton from s: a
// token is allowed when every byte of it is, and a subtree is skipped at the
// first byte refused. End-of-generation tokens are allowed where the
// grammar may end.
func (gd *Guide) computeMask(s int32) *mask {
	v, a := gd.v, gd.a
	words := (v.size + 63) / 64
	if len(gd.scratch) != words {
		gd.scratch = make([]uint64, words)
	}
	allowed := gd.scratch
	clear(allowed)
	if len(gd.stk) < v.maxDepth+1 {
		gd.stk = make([]int32, v.maxDepth+1)
	}
	stk := gd.stk
	stk[0] = s
	count := 0
	maxSucc := int32(0)
	nodeByte, depth, skip, tokStart, toks := v.nodeByte, v.depth, v.skip, v.tokStart, v.toks
	for i := 0; i < len(nodeByte); {
		d := depth[i]
		cur := stk[d-1]
		if !a.done[cur] {
			a.row(cur)
		}
		ns := a.trans[int(cur)<<8|int(nodeByte[i])]
		if ns == dead {
			i = int(skip[i])
			continue
		}
		stk[d] = ns
		if tokStart[i] < tokStart[i+1] {
			maxSucc = max(maxSucc, a.minBytes(ns))
		}
		for _, t := range toks[tokStart[i]:tokStart[i+1]] {
			allowed[t>>6] |= 1 << (t & 63)
			count++
		}
		i++
	}
	if a.states[s].accept {
		for _, t := range v.eog {
			allowed[t>>6] |= 1 << (t & 63)
			count++
		}
	}
	m := &mask{count: count, maxSuccBytes: maxSucc}
	switch {
	case count <= v.size/32:
		m.mode = modeAllow
		m.ids = make([]int32, 0, count)
		for w, x := range allowed {
			for ; x != 0; x &= x - 1 {
				m.ids = append(m.ids, int32(w*64+bits.TrailingZeros64(x)))
			}
		}
	case v.size-count <= v.size/32:
		m.mode = modeDeny
		m.ids = make([]int32, 0, v.size-count)
		for w, x := range allowed {
			x = ^x
			for ; x != 0; x &= x - 1 {
				id := int32(w*64 + bits.TrailingZeros64(x))
				if int(id) >= v.size {
					break
				}
				m.ids = append(m.ids, id)
			}
		}
	default:
		m.mode = modeBits
		m.bits = slices.Clone(allowed)
	}
	return m
}

// Constraint is one sequence's position in a guide: it masks the logits of
// each step to the tokens that keep the output a prefix of a sentence, and
// allows end-of-generation only where a sentence is complete. It is used by
// one goroutine (the scheduler's); many constraints share a guide.
type Constraint struct {
	gd     *Guide
	s      int32
	ended  bool
	broken bool

	// left is the tokens the sequence may still write, the next one
	// included (0: not told; see Budget); closed is set once the budget
	// took a token the grammar allows away (the closure was forced).
	left   int
	closed bool

	ids    []int32
	logits []float32
}

// NewConstraint starts a sequence at the beginning of the grammar.
func (gd *Guide) NewConstraint() *Constraint {
	return &Constraint{gd: gd, s: gd.a.start}
}

// Sample picks the next token from row with smp among the tokens allowed.
// It may overwrite row; with masked set, row is left with -Inf at every
// token not allowed (so logprobs are those of the constrained
// distribution). If no token is allowed at all (a grammar that needs bytes
// no token writes), it returns an end-of-generation token (or 0 with a
// vocabulary without one) and the constraint is broken.
func (c *Constraint) Sample(smp *sample.Sampler, row []float32, masked bool) int32 {
	gd := c.gd
	gd.mu.Lock()
	s := c.s
	if c.ended || c.broken {
		s = dead
	}
	m := gd.maskFor(s)
	if c.left > 0 && s != dead && gd.needsClosure(s, m, c.left) {
		// Keep room to close: s has a way to close within left
		// tokens (the previous step saw to it), and the next token
		// must leave one within left-1.
		budget := maxSearch
		if gd.fits(s, int32(c.left), &budget) {
			if fm := gd.forcedMask(s, int32(c.left-1)); fm.count < m.count {
				c.closed = true
				m = fm
			}
		}
	}
	gd.mu.Unlock()
	if m.count == 0 {
		c.broken = true
		if len(gd.v.eog) > 0 {
			return gd.v.eog[0]
		}
		return 0
	}
	inf := float32(math.Inf(-1))
	var id int32
	switch m.mode {
	case modeAllow:
		c.ids = append(c.ids[:0], m.ids...)
		c.logits = c.logits[:0]
		for _, t := range m.ids {
			c.logits = append(c.logits, row[t])
		}
		if masked {
			for i := range row {
				row[i] = inf
			}
			for i, t := range m.ids {
				row[t] = c.logits[i]
			}
		}
		id = smp.SampleCandidates(c.ids, c.logits)
	case modeDeny:
		for _, t := range m.ids {
			row[t] = inf
		}
		id = smp.Sample(row)
	default:
		for w, x := range m.bits {
			if x == math.MaxUint64 {
				continue
			}
			base := w * 64
			for b := range 64 {
				if x&(1<<b) == 0 && base+b < len(row) {
					row[base+b] = inf
				}
			}
		}
		id = smp.Sample(row)
	}
	if id < 0 || int(id) >= gd.v.size || !m.allows(id) {
		// Every allowed logit was -Inf or NaN: any allowed token is
		// as good as another.
		id = m.first()
	}
	return id
}

// Advance moves past token id and reports whether the output is complete
// with nothing allowed to follow (the sequence should end now).
func (c *Constraint) Advance(id int32) bool {
	gd := c.gd
	if id >= 0 && int(id) < gd.v.size && gd.v.isEOG[id] {
		c.ended = true
		return true
	}
	gd.mu.Lock()
	defer gd.mu.Unlock()
	if c.broken || c.ended {
		return true
	}
	s := c.s
	if id >= 0 && int(id) < gd.v.size {
		p := gd.v.pieces[id]
		for i := 0; i < len(p) && s != dead; i++ {
			s = gd.a.step(s, p[i])
		}
		if p == "" {
			s = dead
		}
	} else {
		s = dead
	}
	c.s = s
	if s == dead {
		c.broken = true
		return true
	}
	return gd.a.complete(s)
}

// Budget tells the constraint how many tokens the sequence may still
// write, the next one included. Once that gets close to what the grammar
// still needs, Sample allows only the tokens that leave room to complete
// a sentence within it (closure.go), so that a reply cut by its budget is
// still complete. The engine calls it before each Sample; left <= 0
// turns the closure off.
func (c *Constraint) Budget(left int) { c.left = left }

// ClosureForced reports whether the budget ever refused a token the
// grammar allowed: the reply was closed early to fit.
func (c *Constraint) ClosureForced() bool { return c.closed }

// Accepting reports whether the output so far is a complete sentence.
func (c *Constraint) Accepting() bool {
	c.gd.mu.Lock()
	defer c.gd.mu.Unlock()
	return c.ended || (!c.broken && c.gd.a.states[c.s].accept)
}

// State is the constraint's position, for rolling back (speculative
// decoding); SetState returns to one.
func (c *Constraint) State() int32 { return c.s }

// SetState returns to a position from State.
func (c *Constraint) SetState(s int32) { c.s, c.ended, c.broken = s, false, false }

// Fork returns a constraint at the same position that moves on its own:
// speculative decoding checks a draft with one, masking the target's row
// for each drafted position with the fork's state and advancing it by
// the draft, while the sequence's constraint stays where the output is.
func (c *Constraint) Fork() *Constraint {
	return &Constraint{gd: c.gd, s: c.s, ended: c.ended, broken: c.broken, left: c.left}
}

// Allows reports whether id may come next (an end token where the output
// may end), without moving: a drafter's tokens can be cut at the first
// one the grammar refuses before the target sees them.
func (c *Constraint) Allows(id int32) bool {
	gd := c.gd
	if c.ended || c.broken || id < 0 || int(id) >= gd.v.size {
		return false
	}
	gd.mu.Lock()
	defer gd.mu.Unlock()
	if gd.v.isEOG[id] {
		return gd.a.states[c.s].accept
	}
	p := gd.v.pieces[id]
	if p == "" {
		return false
	}
	s := c.s
	for i := 0; i < len(p) && s != dead; i++ {
		s = gd.a.step(s, p[i])
	}
	return s != dead
}

// PieceSource is what TokenPieces reads from a tokenizer.
type PieceSource interface {
	VocabSize() int
	Piece(id int32, special bool) string
}

// TokenPieces returns the text each token writes as a server streams it:
// the piece of every normal, byte and user-defined token, and of the control
// tokens in render (written out, such as a chat format's tags); "" for the
// other control tokens, which write nothing.
func TokenPieces(tok PieceSource, render map[int32]bool) []string {
	out := make([]string, tok.VocabSize())
	for i := range out {
		out[i] = tok.Piece(int32(i), render[int32(i)])
	}
	return out
}
