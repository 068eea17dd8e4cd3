package grammar

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"
)

// stackNode is one entry of a parse stack: a position in the grammar (an
// element index) and the node below it (-1: the bottom).
type stackNode struct {
	pos    int32
	parent int32
}

// dstate is a state of the byte automaton: the stacks whose top is a byte
// set, and whether the start rule may end here.
type dstate struct {
	tops   []int32 // stack node ids, sorted
	accept bool
}

// dead is the automaton's state with no stacks: nothing can follow.
const dead int32 = 0

// automaton is the lazily built deterministic automaton of a grammar. Its
// states are interned sets of interned stacks; trans holds a row of 256
// next states per state whose row has been computed (done). It is not safe
// for concurrent use: its Guide serialises access.
type automaton struct {
	g        *Grammar
	nodes    []stackNode
	nodeIdx  map[stackNode]int32
	states   []dstate
	stateIdx map[string]int32
	trans    []int32 // state*256 + byte
	done     []bool
	start    int32

	// overflow is set once a closure needed more than maxClosure stacks:
	// the grammar is too ambiguous to follow, and that state was made dead.
	overflow bool

	// Shortest completions (closure.go): the grammar's lengths, and per
	// stack node and state the fewest bytes to acceptance (-1: unknown).
	lens     *lengths
	cost     []int32
	dbytes   []int32
	chainBuf []int32

	// scratch of closure computations
	seen   map[stackNode]struct{}
	tops   []int32
	accept bool
	over   bool // this closure overflowed
	key    []byte
}

// maxClosure bounds the stacks one closure may visit. Ordinary grammars
// stay far below it; a grammar nesting nullable repetitions (("a"?){5000})
// would otherwise cost time quadratic in its size per byte.
const maxClosure = 1 << 12

func newAutomaton(g *Grammar) *automaton {
	a := &automaton{g: g, nodeIdx: map[stackNode]int32{}, stateIdx: map[string]int32{}, seen: map[stackNode]struct{}{}, lens: minLengths(g)}
	// State 0 is the dead state, its row all dead.
	a.states = append(a.states, dstate{})
	a.stateIdx[""] = 0
	a.trans = make([]int32, 256)
	a.done = []bool{true}
	a.begin()
	for _, p := range g.rules[g.root] {
		a.expand(p, -1)
	}
	a.start = a.finish()
	return a
}

func (a *automaton) node(pos, parent int32) int32 {
	k := stackNode{pos, parent}
	if id, ok := a.nodeIdx[k]; ok {
		return id
	}
	id := int32(len(a.nodes))
	a.nodes = append(a.nodes, k)
	a.nodeIdx[k] = id
	return id
}

func (a *automaton) begin() {
	clear(a.seen)
	a.tops = a.tops[:0]
	a.accept = false
	a.over = false
}

// expand adds to the state being built every stack that continues at pos
// above parent, following rule references (pushing the return position,
// unless the rest of the alternative is empty) and alternative ends
// (popping) until each stack's top is a byte set.
func (a *automaton) expand(pos, parent int32) {
	k := stackNode{pos, parent}
	if _, ok := a.seen[k]; ok {
		return
	}
	if len(a.seen) >= maxClosure {
		a.overflow, a.over = true, true
		return
	}
	a.seen[k] = struct{}{}
	switch e := a.g.elems[pos]; e.kind {
	case kSet:
		a.tops = append(a.tops, a.node(pos, parent))
	case kEnd:
		if parent < 0 {
			a.accept = true
			return
		}
		p := a.nodes[parent]
		a.expand(p.pos, p.parent)
	case kRef:
		cont := parent
		if a.g.elems[pos+1].kind != kEnd {
			cont = a.node(pos+1, parent)
		}
		for _, alt := range a.g.rules[e.arg] {
			a.expand(alt, cont)
		}
	}
}

// finish interns the state built since begin.
func (a *automaton) finish() int32 {
	if a.over || len(a.tops) == 0 && !a.accept {
		return dead
	}
	slices.Sort(a.tops)
	a.tops = slices.Compact(a.tops)
	a.key = a.key[:0]
	if a.accept {
		a.key = append(a.key, 1)
	} else {
		a.key = append(a.key, 0)
	}
	for _, t := range a.tops {
		a.key = binary.LittleEndian.AppendUint32(a.key, uint32(t))
	}
	if id, ok := a.stateIdx[string(a.key)]; ok {
		return id
	}
	id := int32(len(a.states))
	a.states = append(a.states, dstate{tops: slices.Clone(a.tops), accept: a.accept})
	a.stateIdx[string(a.key)] = id
	a.trans = append(a.trans, make([]int32, 256)...)
	a.done = append(a.done, false)
	return id
}

// row computes state s's transitions. Bytes that advance the same stacks
// lead to the same state, so the closure is computed once per distinct set
// of advancing stacks, not once per byte.
func (a *automaton) row(s int32) {
	tops := a.states[s].tops
	var next [256]int32
	if len(tops) <= 64 {
		var sig [256]uint64
		for i, t := range tops {
			set := &a.g.sets[a.g.elems[a.nodes[t].pos].arg]
			for w := range 4 {
				for m := set[w]; m != 0; m &= m - 1 {
					b := w*64 + bits.TrailingZeros64(m)
					sig[b] |= 1 << uint(i)
				}
			}
		}
		memo := map[uint64]int32{0: dead}
		for b := range 256 {
			if id, ok := memo[sig[b]]; ok {
				next[b] = id
				continue
			}
			a.begin()
			for m := sig[b]; m != 0; m &= m - 1 {
				n := a.nodes[tops[bits.TrailingZeros64(m)]]
				a.expand(n.pos+1, n.parent)
			}
			id := a.finish()
			memo[sig[b]] = id
			next[b] = id
		}
	} else {
		for b := range 256 {
			a.begin()
			for _, t := range tops {
				n := a.nodes[t]
				if a.g.sets[a.g.elems[n.pos].arg].has(byte(b)) {
					a.expand(n.pos+1, n.parent)
				}
			}
			next[b] = a.finish()
		}
	}
	// finish may have grown trans; index it afresh.
	copy(a.trans[int(s)*256:], next[:])
	a.done[s] = true
}

// step is the state after byte b from s.
func (a *automaton) step(s int32, b byte) int32 {
	if !a.done[s] {
		a.row(s)
	}
	return a.trans[int(s)*256+int(b)]
}

// complete reports whether s accepts and no byte may follow.
func (a *automaton) complete(s int32) bool {
	if !a.states[s].accept {
		return false
	}
	if !a.done[s] {
		a.row(s)
	}
	for _, t := range a.trans[int(s)*256 : int(s)*256+256] {
		if t != dead {
			return false
		}
	}
	return true
}

// Accepts reports whether text is a complete sentence of the grammar.
func (g *Grammar) Accepts(text string) bool {
	ok, complete := g.Check(text)
	return ok && complete
}

// Check reports whether text is a prefix of some sentence of the grammar
// (ok), and whether it is a complete sentence.
func (g *Grammar) Check(text string) (ok, complete bool) {
	la := g.automatonForCheck()
	la.mu.Lock()
	defer la.mu.Unlock()
	s := la.a.start
	for i := 0; i < len(text) && s != dead; i++ {
		s = la.a.step(s, text[i])
	}
	if s == dead {
		return false, false
	}
	return true, la.a.states[s].accept
}

// automatonForCheck gives Check its own automaton per grammar, built on
// first use; grammars checked once (tests) are not worth a global table,
// so it lives on the grammar.
func (g *Grammar) automatonForCheck() *lockedAutomaton {
	g.checkOnce.Do(func() { g.check = &lockedAutomaton{a: newAutomaton(g)} })
	return g.check
}

type lockedAutomaton struct {
	mu sync.Mutex
	a  *automaton
}
