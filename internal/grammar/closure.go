package grammar

import (
	"math"
	"math/bits"
)

// Closing a structure within a token budget.
//
// A constrained reply cut by max_tokens inside a string is not JSON. To
// keep every constrained reply a sentence of its grammar, a Constraint told
// how many tokens are left (Budget) allows, once the budget gets close,
// only the tokens after which the rest of a sentence still fits: token t is
// allowed in state s with L tokens left (t included) when the fewest tokens
// that reach an accepting state from step(s, t) is at most L-1.
//
// That distance is counted in tokens of the vocabulary, not bytes. Three
// tools compute it, cheapest first:
//
//   - the byte distance to accept of a state (minBytes), exact and cheap:
//     each stack of the state costs the fewest bytes that finish the rest
//     of its alternatives, from a fixpoint of rule lengths. With every
//     single byte a token, the token distance is at most the byte
//     distance, so a successor whose byte distance fits needs nothing more;
//     and ceil(bytes / longest token) is a lower bound.
//   - a completion path: the shortest byte completion written with the
//     fewest tokens (a dynamic program over the vocabulary's trie). It is
//     an achievable upper bound.
//   - a breadth-first search over states, edges being the tokens the
//     guide allows, bounded by the budget and by the best path known: it
//     finds the exact distance when the shortest completion in tokens is
//     not the shortest in bytes.
//
// Every distance found comes with its path, kept in the guide as closing
// entries (state -> distance, first token, next state) whose next entry's
// distance is always at least one less. A constraint under a forced
// closure always has such an entry within its budget, and its first token
// is always allowed: so the closure cannot fail even where a search was
// cut short.

// inf is the distance of what cannot be reached.
const inf = math.MaxInt32 / 4

func addSat(a, b int32) int32 {
	if a >= inf || b >= inf || a+b >= inf {
		return inf
	}
	return a + b
}

// lengths are a grammar's shortest derivations in bytes: of each rule, of
// the rest of each alternative from each element, and the alternative of
// each rule that achieves it (acyclic: see minLengths).
type lengths struct {
	rule    []int32 // rule -> fewest bytes
	rest    []int32 // element position -> fewest bytes to its alternative's end
	bestAlt []int32 // rule -> position of its shortest alternative (-1: none)
}

// minLengths computes the shortest derivations by a fixpoint from above.
// A rule's best alternative is recorded at its last strict improvement:
// every rule it references had its final value before then (a later
// improvement of one would improve this rule again), so following best
// alternatives never loops.
func minLengths(g *Grammar) *lengths {
	l := &lengths{rule: make([]int32, len(g.rules)), rest: make([]int32, len(g.elems)), bestAlt: make([]int32, len(g.rules))}
	for r := range l.rule {
		l.rule[r], l.bestAlt[r] = inf, -1
	}
	altLen := func(p int32) int32 {
		n := int32(0)
		for ; g.elems[p].kind != kEnd; p++ {
			switch e := g.elems[p]; e.kind {
			case kSet:
				n = addSat(n, 1)
			case kRef:
				n = addSat(n, l.rule[e.arg])
			}
		}
		return n
	}
	for changed := true; changed; {
		changed = false
		for r, alts := range g.rules {
			for _, a := range alts {
				if n := altLen(a); n < l.rule[r] {
					l.rule[r], l.bestAlt[r] = n, a
					changed = true
				}
			}
		}
	}
	for p := len(g.elems) - 1; p >= 0; p-- {
		switch e := g.elems[p]; e.kind {
		case kEnd:
			l.rest[p] = 0
		case kSet:
			l.rest[p] = addSat(1, l.rest[p+1])
		case kRef:
			l.rest[p] = addSat(l.rule[e.arg], l.rest[p+1])
		}
	}
	return l
}

// nodeCost is the fewest bytes that finish stack node n and those below.
func (a *automaton) nodeCost(n int32) int32 {
	for len(a.cost) < len(a.nodes) {
		a.cost = append(a.cost, -1)
	}
	if c := a.cost[n]; c >= 0 {
		return c
	}
	// Iteratively: parents come first in creation order, but a chain
	// may be long; walk it down, then fill it in on the way back.
	chain := a.chainBuf[:0]
	for m := n; m >= 0 && a.cost[m] < 0; m = a.nodes[m].parent {
		chain = append(chain, m)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		m := chain[i]
		c := a.lens.rest[a.nodes[m].pos]
		if p := a.nodes[m].parent; p >= 0 {
			c = addSat(c, a.cost[p])
		}
		a.cost[m] = c
	}
	a.chainBuf = chain
	return a.cost[n]
}

// minBytes is the fewest bytes from state s to an accepting state (inf
// from the dead state, or where the grammar has no finite sentence).
func (a *automaton) minBytes(s int32) int32 {
	for len(a.dbytes) < len(a.states) {
		a.dbytes = append(a.dbytes, -1)
	}
	if d := a.dbytes[s]; d >= 0 {
		return d
	}
	d := int32(inf)
	if a.states[s].accept {
		d = 0
	} else {
		for _, t := range a.states[s].tops {
			d = min(d, a.nodeCost(t))
		}
	}
	a.dbytes[s] = d
	return d
}

// pickByte is the byte a shortest completion writes for a set: a letter
// or digit where the set has one (they are single tokens in any
// vocabulary), else the first printable byte, else the first.
func pickByte(set *byteSet) byte {
	for _, r := range [][2]int{{'a', 'z'}, {'0', '9'}, {'A', 'Z'}, {' ', '~'}} {
		for b := r[0]; b <= r[1]; b++ {
			if set.has(byte(b)) {
				return byte(b)
			}
		}
	}
	for w, x := range set {
		if x != 0 {
			return byte(w*64 + bits.TrailingZeros64(x))
		}
	}
	return 0
}

// shortestText appends to buf the shortest byte completion of s: the
// cheapest stack's rest, each rule by its best alternative. false when s
// cannot be completed.
func (a *automaton) shortestText(s int32, buf []byte) ([]byte, bool) {
	if a.states[s].accept {
		return buf, true
	}
	d := a.minBytes(s)
	if d >= inf {
		return buf, false
	}
	best := int32(-1)
	for _, t := range a.states[s].tops {
		if a.nodeCost(t) == d {
			best = t
			break
		}
	}
	for n := best; n >= 0; n = a.nodes[n].parent {
		buf = a.writeRest(a.nodes[n].pos, buf)
	}
	return buf, true
}

// writeRest appends the shortest text of the alternative's rest from pos.
func (a *automaton) writeRest(pos int32, buf []byte) []byte {
	g := a.g
	for p := pos; g.elems[p].kind != kEnd; p++ {
		switch e := g.elems[p]; e.kind {
		case kSet:
			buf = append(buf, pickByte(&g.sets[e.arg]))
		case kRef:
			buf = a.writeRest(a.lens.bestAlt[e.arg], buf)
		}
	}
	return buf
}

// closeEntry is a known way to close from a state: dist tokens, the first
// being tok, which leads to next (whose own entry, or acceptance, is at
// most dist-1 away).
type closeEntry struct {
	dist int32
	tok  int32
	next int32
}

// succ is one distinct state after one token from a state, with the first
// token (in trie order) that leads there.
type succ struct {
	state int32
	tok   int32
}

// maxSearch bounds the states one search expands (each costs a walk of
// the vocabulary's trie); past it the search keeps the best path it has.
const maxSearch = 256

// successors lists the distinct states one token leads to from s, cached.
// The caller holds gd.mu.
func (gd *Guide) successors(s int32) []succ {
	if l, ok := gd.succs[s]; ok {
		return l
	}
	v, a := gd.v, gd.a
	// Its own stack: successors runs inside forcedMask's walk.
	stk := make([]int32, v.maxDepth+1)
	stk[0] = s
	seen := map[int32]bool{}
	var out []succ
	for i := 0; i < len(v.nodeByte); {
		d := v.depth[i]
		ns := a.step(stk[d-1], v.nodeByte[i])
		if ns == dead {
			i = int(v.skip[i])
			continue
		}
		stk[d] = ns
		if t := v.toks[v.tokStart[i]:v.tokStart[i+1]]; len(t) > 0 && !seen[ns] {
			seen[ns] = true
			out = append(out, succ{ns, t[0]})
		}
		i++
	}
	gd.succs[s] = out
	return out
}

// record keeps the path s --toks--> (accepting) as closing entries, each
// where it improves on what is known.
func (gd *Guide) record(s int32, toks []int32) {
	n := int32(len(toks))
	for i, t := range toks {
		next := gd.stepToken(s, t)
		d := n - int32(i)
		if e, ok := gd.close[s]; !ok || d < e.dist {
			gd.close[s] = closeEntry{dist: d, tok: t, next: next}
		}
		s = next
	}
}

// stepToken is the state after token t's bytes from s.
func (gd *Guide) stepToken(s int32, t int32) int32 {
	p := gd.v.pieces[t]
	for i := 0; i < len(p) && s != dead; i++ {
		s = gd.a.step(s, p[i])
	}
	return s
}

// textPath writes the shortest byte completion of s with the fewest
// tokens and records it. false when there is none (s cannot be completed,
// or the vocabulary cannot write its shortest completion).
func (gd *Guide) textPath(s int32) bool {
	text, ok := gd.a.shortestText(s, gd.textBuf[:0])
	gd.textBuf = text
	if !ok {
		return false
	}
	if len(text) == 0 {
		return true
	}
	v := gd.v
	n := len(text)
	best := make([]int32, n+1)
	from := make([]int32, n+1) // token that ends at position i
	for i := range best {
		best[i] = inf
	}
	best[0] = 0
	for i := 0; i < n; i++ {
		if best[i] >= inf {
			continue
		}
		// Walk down the trie along text[i:].
		node, end := 0, len(v.nodeByte)
		for k := i; k < n && node < end; k++ {
			// Find the child of the current level with byte text[k]:
			// siblings are linked by skip.
			for node < end && v.nodeByte[node] != text[k] {
				node = int(v.skip[node])
			}
			if node >= end {
				break
			}
			if t := v.toks[v.tokStart[node]:v.tokStart[node+1]]; len(t) > 0 && best[i]+1 < best[k+1] {
				best[k+1], from[k+1] = best[i]+1, t[0]
			}
			end = int(v.skip[node])
			node++
		}
	}
	if best[n] >= inf {
		return false
	}
	toks := make([]int32, best[n])
	for i, j := n, len(toks)-1; i > 0; j-- {
		toks[j] = from[i]
		i -= len(v.pieces[from[i]])
	}
	gd.record(s, toks)
	return true
}

// knownDist is the distance of a closing entry of s (0 where s accepts,
// inf where none is known).
func (gd *Guide) knownDist(s int32) int32 {
	if s == dead {
		return inf
	}
	if gd.a.states[s].accept {
		return 0
	}
	if e, ok := gd.close[s]; ok {
		return e.dist
	}
	return inf
}

// lowerBound is a distance no path from s beats: its bytes over the
// longest token.
func (gd *Guide) lowerBound(s int32) int32 {
	b := gd.a.minBytes(s)
	if b >= inf {
		return inf
	}
	m := int32(max(gd.v.maxDepth, 1))
	return (b + m - 1) / m
}

// fits reports whether s can reach acceptance in at most limit tokens,
// recording the path that shows it. *budget counts the expansions the
// caller still allows searches (shared by the successors of one step).
// The caller holds gd.mu.
func (gd *Guide) fits(s int32, limit int32, budget *int) bool {
	if s == dead || limit < 0 {
		return false
	}
	if gd.knownDist(s) <= limit {
		return true
	}
	if gd.lowerBound(s) > limit {
		return false
	}
	if _, tried := gd.pathTried[s]; !tried {
		gd.pathTried[s] = struct{}{}
		gd.textPath(s)
		if gd.knownDist(s) <= limit {
			return true
		}
	}
	gd.search(s, limit, budget)
	return gd.knownDist(s) <= limit
}

// search is a breadth-first search from s for a path to acceptance shorter
// than what is known and at most limit tokens, expanding at most *budget
// states; the best path found is recorded.
func (gd *Guide) search(s int32, limit int32, budget *int) {
	best := min(gd.knownDist(s), limit+1)
	type from struct {
		prev int32
		tok  int32
	}
	seen := map[int32]from{s: {-1, -1}}
	frontier := []int32{s}
	target := int32(-1) // the state whose known path ends the best path
	for depth := int32(0); len(frontier) > 0 && depth+1 < best; depth++ {
		var next []int32
		for _, x := range frontier {
			if *budget <= 0 {
				break
			}
			if depth+gd.lowerBound(x) >= best {
				continue
			}
			*budget--
			for _, sc := range gd.successors(x) {
				if _, ok := seen[sc.state]; ok {
					continue
				}
				seen[sc.state] = from{x, sc.tok}
				if d := addSat(depth+1, gd.knownDist(sc.state)); d < best {
					best, target = d, sc.state
				}
				next = append(next, sc.state)
			}
		}
		frontier = next
	}
	if target < 0 {
		return
	}
	// The path: back from target to s, then target's own known path.
	var toks []int32
	for x := target; x != s; x = seen[x].prev {
		toks = append(toks, seen[x].tok)
	}
	for i, j := 0, len(toks)-1; i < j; i, j = i+1, j-1 {
		toks[i], toks[j] = toks[j], toks[i]
	}
	for x := target; !gd.a.states[x].accept; {
		e := gd.close[x]
		toks = append(toks, e.tok)
		x = e.next
	}
	gd.record(s, toks)
}

// MinTokens is the fewest tokens of the vocabulary that make a complete
// sentence of the grammar (end-of-generation tokens not counted): a
// request whose budget is smaller cannot be answered with a valid reply.
// ok is false when the vocabulary cannot write any sentence the search
// looked at (the closure is then not guaranteed).
func (gd *Guide) MinTokens() (n int, ok bool) {
	gd.mu.Lock()
	defer gd.mu.Unlock()
	if gd.minKnown {
		return gd.minTokens, gd.minOK
	}
	gd.minTokens, gd.minOK = gd.minTokensLocked()
	gd.minKnown = true
	return gd.minTokens, gd.minOK
}

func (gd *Guide) minTokensLocked() (int, bool) {
	s := gd.a.start
	budget := maxSearch
	if !gd.fits(s, inf-1, &budget) {
		return 0, false
	}
	// fits stops at the first path within the limit; search for a
	// shorter one.
	gd.search(s, gd.knownDist(s)-1, &budget)
	return int(gd.knownDist(s)), true
}

// MinTokens is the fewest tokens of a complete reply from the start (see
// Guide.MinTokens).
func (c *Constraint) MinTokens() (int, bool) { return c.gd.MinTokens() }

// HasFiniteSentence reports whether the grammar has any finite sentence
// (a grammar such as root ::= "a" root has none).
func (gd *Guide) HasFiniteSentence() bool {
	gd.mu.Lock()
	defer gd.mu.Unlock()
	return gd.a.minBytes(gd.a.start) < inf
}

// forcedMask is the mask of state s when at most limit tokens may follow
// the next one: the grammar's tokens after which acceptance is within
// limit, end-of-generation where s accepts, and always the first token
// of s's closing entry. Cached per (s, limit). The caller holds gd.mu.
func (gd *Guide) forcedMask(s int32, limit int32) *mask {
	key := [2]int32{s, limit}
	if m, ok := gd.forced[key]; ok {
		if e, has := gd.close[s]; !has || m.allows(e.tok) {
			return m
		}
	}
	v, a := gd.v, gd.a
	words := (v.size + 63) / 64
	allowed := make([]uint64, words)
	// Its own stack: the searches that fits runs walk the trie too.
	stk := make([]int32, v.maxDepth+1)
	stk[0] = s
	fit := map[int32]bool{}
	budget := maxSearch
	count := 0
	for i := 0; i < len(v.nodeByte); {
		d := v.depth[i]
		ns := a.step(stk[d-1], v.nodeByte[i])
		if ns == dead {
			i = int(v.skip[i])
			continue
		}
		stk[d] = ns
		if t := v.toks[v.tokStart[i]:v.tokStart[i+1]]; len(t) > 0 {
			ok, known := fit[ns]
			if !known {
				ok = gd.fits(ns, limit, &budget)
				fit[ns] = ok
			}
			if ok {
				for _, id := range t {
					allowed[id>>6] |= 1 << (id & 63)
					count++
				}
			}
		}
		i++
	}
	if e, has := gd.close[s]; has && allowed[e.tok>>6]&(1<<(e.tok&63)) == 0 {
		allowed[e.tok>>6] |= 1 << (e.tok & 63)
		count++
	}
	if a.states[s].accept {
		for _, t := range v.eog {
			allowed[t>>6] |= 1 << (t & 63)
			count++
		}
	}
	m := &mask{mode: modeBits, bits: allowed, count: count}
	if gd.forcedBytes += m.bytes(); gd.forcedBytes > maxMaskBytes {
		clear(gd.forced)
		gd.forcedBytes = m.bytes()
	}
	gd.forced[key] = m
	return m
}

// needsClosure reports whether, with left tokens to go (the next one
// included), some token the grammar allows in s could leave too little
// room to close. With every byte a token, a successor's token distance is
// at most its byte distance, so the most bytes any successor needs
// decides; otherwise the closure is checked at every step.
func (gd *Guide) needsClosure(s int32, m *mask, left int) bool {
	if !gd.v.bytesCovered {
		return true
	}
	return int64(m.maxSuccBytes) > int64(left)-1
}
