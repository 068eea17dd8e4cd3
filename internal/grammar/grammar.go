// Package grammar constrains generated text to a formal language: a
// context-free grammar over bytes, built from GBNF (llama.cpp's grammar
// notation), from a JSON Schema, or by code (tool-call formats). A Guide binds
// a grammar to a model's vocabulary and gives, for each state of the output,
// the tokens that keep it valid.
//
// How it works. Rules are lowered to alternatives of flat sequences whose
// elements are byte sets and rule references, as llama.cpp lays out its
// grammars. A parse position is a stack of positions (a return address per
// rule being matched); because a grammar may be ambiguous, the parser state is
// a set of such stacks. Stacks are interned (a node is a position and a link
// to its parent node) and a right-most call does not push a return address
// (the rest of its alternative is empty), so a repetition does not grow the
// stack. Sets of stacks are interned too: each distinct set is one state of
// a deterministic automaton over bytes that is built lazily, its transition
// rows computed the first time they are needed and kept. Matching a token is
// then one table lookup per byte, and the tokens allowed in a state are found
// once, by walking a trie of the vocabulary through the automaton, pruning a
// whole subtree at the first byte the grammar refuses; the result is cached
// per state.
package grammar

import (
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"unicode/utf8"
)

// byteSet is a set of bytes, one bit each.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) addRange(lo, hi int) {
	for b := lo; b <= hi; b++ {
		s.add(byte(b))
	}
}
func (s *byteSet) empty() bool { return s[0]|s[1]|s[2]|s[3] == 0 }
func (s *byteSet) count() int {
	return bits.OnesCount64(s[0]) + bits.OnesCount64(s[1]) + bits.OnesCount64(s[2]) + bits.OnesCount64(s[3])
}

type op uint8

const (
	opEmpty  op = iota // matches ""
	opBytes            // one byte from set
	opLit              // the bytes of lit
	opSeq              // kids in order
	opAlt              // one of kids
	opRef              // rule ref
	opRepeat           // kids[0] between min and max times (max < 0: unbounded)
)

// Node is an expression of the grammar being built: use the constructors
// (Lit, Seq, Alt, ...) and Builder.Define.
type Node struct {
	op       op
	set      byteSet
	lit      string
	kids     []*Node
	ref      int
	min, max int
}

// Empty matches the empty string.
func Empty() *Node { return &Node{op: opEmpty} }

// Lit matches s byte for byte.
func Lit(s string) *Node {
	if s == "" {
		return Empty()
	}
	return &Node{op: opLit, lit: s}
}

// ByteRange matches one byte in [lo, hi].
func ByteRange(lo, hi byte) *Node {
	n := &Node{op: opBytes}
	n.set.addRange(int(lo), int(hi))
	return n
}

// Seq matches its parts one after another.
func Seq(parts ...*Node) *Node {
	switch len(parts) {
	case 0:
		return Empty()
	case 1:
		return parts[0]
	}
	return &Node{op: opSeq, kids: parts}
}

// Alt matches any one of its choices.
func Alt(choices ...*Node) *Node {
	if len(choices) == 1 {
		return choices[0]
	}
	return &Node{op: opAlt, kids: choices}
}

// Repeat matches n between min and max times; max < 0 means no limit.
func Repeat(n *Node, min, max int) *Node {
	if max >= 0 && max < min {
		max = min
	}
	if min == 1 && max == 1 {
		return n
	}
	return &Node{op: opRepeat, kids: []*Node{n}, min: min, max: max}
}

// Opt matches n or nothing.
func Opt(n *Node) *Node { return Repeat(n, 0, 1) }

// Star matches n any number of times.
func Star(n *Node) *Node { return Repeat(n, 0, -1) }

// Plus matches n at least once.
func Plus(n *Node) *Node { return Repeat(n, 1, -1) }

// RuneRange is a closed range of code points.
type RuneRange struct{ Lo, Hi rune }

// Class matches one UTF-8 encoded code point in ranges (or, with negate, one
// not in them). Surrogates are never matched: they are not valid UTF-8.
func Class(ranges []RuneRange, negate bool) *Node {
	rs := normalizeRanges(ranges)
	if negate {
		rs = invertRanges(rs)
	}
	var alts []*Node
	ascii := &Node{op: opBytes}
	for _, r := range rs {
		utf8Sequences(r.Lo, r.Hi, func(seq []byteRangeT) {
			if len(seq) == 1 {
				ascii.set.addRange(int(seq[0].lo), int(seq[0].hi))
				return
			}
			parts := make([]*Node, len(seq))
			for i, br := range seq {
				parts[i] = ByteRange(br.lo, br.hi)
			}
			alts = append(alts, Seq(parts...))
		})
	}
	if !ascii.set.empty() {
		alts = append([]*Node{ascii}, alts...)
	}
	if len(alts) == 0 {
		// Matches nothing: an empty byte set.
		return &Node{op: opBytes}
	}
	return Alt(alts...)
}

// AnyChar matches one UTF-8 encoded code point.
func AnyChar() *Node { return Class([]RuneRange{{0, utf8.MaxRune}}, false) }

func normalizeRanges(in []RuneRange) []RuneRange {
	rs := make([]RuneRange, 0, len(in))
	for _, r := range in {
		if r.Lo > r.Hi {
			continue
		}
		if r.Lo < 0 {
			r.Lo = 0
		}
		if r.Hi > utf8.MaxRune {
			r.Hi = utf8.MaxRune
		}
		rs = append(rs, r)
	}
	// insertion sort: classes are short
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].Lo < rs[j-1].Lo; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.Lo <= out[n-1].Hi+1 {
			if r.Hi > out[n-1].Hi {
				out[n-1].Hi = r.Hi
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func invertRanges(rs []RuneRange) []RuneRange {
	var out []RuneRange
	next := rune(0)
	for _, r := range rs {
		if r.Lo > next {
			out = append(out, RuneRange{next, r.Lo - 1})
		}
		next = r.Hi + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, RuneRange{next, utf8.MaxRune})
	}
	return out
}

type byteRangeT struct{ lo, hi byte }

// utf8Sequences calls emit with the byte-range sequences whose
// concatenations are exactly the UTF-8 encodings of the code points in
// [lo, hi], surrogates excluded. A range is split where the encoding length
// changes, and then wherever the trailing bytes of its ends do not span
// their full range, so that every piece is a product of byte ranges.
func utf8Sequences(lo, hi rune, emit func([]byteRangeT)) {
	if lo > hi {
		return
	}
	if lo <= 0xDFFF && hi >= 0xD800 {
		utf8Sequences(lo, 0xD7FF, emit)
		utf8Sequences(0xE000, hi, emit)
		return
	}
	for _, m := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= m && m < hi {
			utf8Sequences(lo, m, emit)
			utf8Sequences(m+1, hi, emit)
			return
		}
	}
	if hi <= 0x7F {
		emit([]byteRangeT{{byte(lo), byte(hi)}})
		return
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m == hi&^m {
			continue
		}
		if lo&m != 0 {
			utf8Sequences(lo, lo|m, emit)
			utf8Sequences((lo|m)+1, hi, emit)
			return
		}
		if hi&m != m {
			utf8Sequences(lo, (hi&^m)-1, emit)
			utf8Sequences(hi&^m, hi, emit)
			return
		}
	}
	var a, b [utf8.UTFMax]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	seq := make([]byteRangeT, n)
	for i := range n {
		seq[i] = byteRangeT{a[i], b[i]}
	}
	emit(seq)
}

// Builder assembles a grammar from named rules.
type Builder struct {
	names  []string
	bodies []*Node
	byName map[string]int
	used   map[string]bool // referenced names, for undefined-rule errors
}

// NewBuilder returns an empty builder.
func NewBuilder() *Builder { return &Builder{byName: map[string]int{}, used: map[string]bool{}} }

// Rule returns the id of the rule called name, declaring it if new.
func (b *Builder) Rule(name string) int {
	if id, ok := b.byName[name]; ok {
		return id
	}
	id := len(b.names)
	b.names = append(b.names, name)
	b.bodies = append(b.bodies, nil)
	b.byName[name] = id
	return id
}

// Has reports whether a rule called name is declared.
func (b *Builder) Has(name string) bool { _, ok := b.byName[name]; return ok }

// Defined reports whether the rule called name has a body.
func (b *Builder) Defined(name string) bool {
	id, ok := b.byName[name]
	return ok && b.bodies[id] != nil
}

// Ref refers to the rule called name (declared if new).
func (b *Builder) Ref(name string) *Node {
	b.used[name] = true
	return &Node{op: opRef, ref: b.Rule(name)}
}

// Define sets the body of the rule called name, replacing any earlier one.
func (b *Builder) Define(name string, body *Node) {
	b.bodies[b.Rule(name)] = body
}

// Fresh returns an unused rule name starting with prefix.
func (b *Builder) Fresh(prefix string) string {
	if !b.Has(prefix) {
		return prefix
	}
	for i := 1; ; i++ {
		n := fmt.Sprintf("%s-%d", prefix, i)
		if !b.Has(n) {
			return n
		}
	}
}

// MaxElements bounds a compiled grammar's size (elements of all
// alternatives): beyond it Build fails, so that one request cannot make the
// server build an automaton of unbounded size.
const MaxElements = 1 << 20

type elemKind uint8

const (
	kSet elemKind = iota
	kRef
	kEnd
)

type elem struct {
	kind elemKind
	arg  int32 // set index (kSet) or rule id (kRef)
}

// Grammar is a compiled grammar; it is immutable and safe for concurrent
// use. Bind it to a vocabulary with NewGuide.
type Grammar struct {
	elems []elem
	sets  []byteSet
	rules [][]int32 // rule -> positions of its alternatives' first elements
	names []string
	root  int32

	checkOnce sync.Once
	check     *lockedAutomaton
}

// Rules is the number of rules after lowering (helper rules included).
func (g *Grammar) Rules() int { return len(g.rules) }

// Elements is the size of the grammar in elements.
func (g *Grammar) Elements() int { return len(g.elems) }

type lowerer struct {
	g      *Grammar
	setIdx map[byteSet]int32
	err    error
}

// Build compiles the grammar whose start rule is root. Every referenced
// rule must be defined, and no rule may be left-recursive (reach itself
// before consuming a byte).
func (b *Builder) Build(root string) (*Grammar, error) {
	rid, ok := b.byName[root]
	if !ok || b.bodies[rid] == nil {
		return nil, fmt.Errorf("grammar: no rule %q to start from", root)
	}
	for i, name := range b.names {
		if b.bodies[i] == nil {
			if b.used[name] {
				return nil, fmt.Errorf("grammar: rule %q is used but not defined", name)
			}
			b.bodies[i] = Empty()
		}
	}
	g := &Grammar{names: append([]string(nil), b.names...), rules: make([][]int32, len(b.names)), root: int32(rid)}
	lw := &lowerer{g: g, setIdx: map[byteSet]int32{}}
	for i, body := range b.bodies {
		lw.lowerRule(i, body)
		if lw.err != nil {
			return nil, lw.err
		}
	}
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	return g, nil
}

func (lw *lowerer) newRule(parent int) int {
	id := len(lw.g.rules)
	lw.g.rules = append(lw.g.rules, nil)
	lw.g.names = append(lw.g.names, fmt.Sprintf("%s#%d", lw.g.names[parent], id))
	return id
}

func (lw *lowerer) lowerRule(id int, body *Node) {
	var alts []*Node
	flattenAlt(body, &alts)
	for _, a := range alts {
		var seq []elem
		lw.emit(id, a, &seq)
		if lw.err != nil {
			return
		}
		start := int32(len(lw.g.elems))
		lw.g.elems = append(lw.g.elems, seq...)
		lw.g.elems = append(lw.g.elems, elem{kind: kEnd})
		lw.g.rules[id] = append(lw.g.rules[id], start)
		if len(lw.g.elems) > MaxElements {
			lw.err = fmt.Errorf("grammar: more than %d elements", MaxElements)
			return
		}
	}
}

func flattenAlt(n *Node, out *[]*Node) {
	if n.op == opAlt {
		for _, k := range n.kids {
			flattenAlt(k, out)
		}
		return
	}
	*out = append(*out, n)
}

func (lw *lowerer) set(s byteSet) int32 {
	if i, ok := lw.setIdx[s]; ok {
		return i
	}
	i := int32(len(lw.g.sets))
	lw.g.sets = append(lw.g.sets, s)
	lw.setIdx[s] = i
	return i
}

// emit appends the elements of n to seq, inline where n is a sequence of
// items, through helper rules where it is a choice.
func (lw *lowerer) emit(rule int, n *Node, seq *[]elem) {
	if lw.err != nil {
		return
	}
	if len(*seq) > MaxElements {
		lw.err = fmt.Errorf("grammar: more than %d elements", MaxElements)
		return
	}
	switch n.op {
	case opEmpty:
	case opBytes:
		*seq = append(*seq, elem{kind: kSet, arg: lw.set(n.set)})
	case opLit:
		for i := 0; i < len(n.lit); i++ {
			var s byteSet
			s.add(n.lit[i])
			*seq = append(*seq, elem{kind: kSet, arg: lw.set(s)})
		}
	case opRef:
		*seq = append(*seq, elem{kind: kRef, arg: int32(n.ref)})
	case opSeq:
		for _, k := range n.kids {
			lw.emit(rule, k, seq)
		}
	case opAlt:
		h := lw.newRule(rule)
		lw.lowerRule(h, n)
		*seq = append(*seq, elem{kind: kRef, arg: int32(h)})
	case opRepeat:
		lw.emitRepeat(rule, n, seq)
	default:
		lw.err = fmt.Errorf("grammar: unknown node %d", n.op)
	}
}

// single returns an element standing for one occurrence of n: n itself
// when it is one byte set or one rule reference, else a helper rule.
func (lw *lowerer) single(rule int, n *Node) elem {
	switch {
	case n.op == opBytes:
		return elem{kind: kSet, arg: lw.set(n.set)}
	case n.op == opRef:
		return elem{kind: kRef, arg: int32(n.ref)}
	case n.op == opLit && len(n.lit) == 1:
		var s byteSet
		s.add(n.lit[0])
		return elem{kind: kSet, arg: lw.set(s)}
	}
	h := lw.newRule(rule)
	lw.lowerRule(h, n)
	return elem{kind: kRef, arg: int32(h)}
}

// emitRepeat lowers x{min,max}: min copies of x, then either a loop
// (s ::= x s | "") or nested options (o_k ::= x o_{k-1} | ""), which,
// unlike max-min independent options, leave no ambiguity about which copy
// matched.
func (lw *lowerer) emitRepeat(rule int, n *Node, seq *[]elem) {
	if n.max == 0 {
		return
	}
	x := lw.single(rule, n.kids[0])
	for i := 0; i < n.min; i++ {
		*seq = append(*seq, x)
		if len(*seq) > MaxElements {
			lw.err = fmt.Errorf("grammar: more than %d elements", MaxElements)
			return
		}
	}
	add := func(h int, alt []elem) {
		start := int32(len(lw.g.elems))
		lw.g.elems = append(lw.g.elems, alt...)
		lw.g.elems = append(lw.g.elems, elem{kind: kEnd})
		lw.g.rules[h] = append(lw.g.rules[h], start)
	}
	if n.max < 0 {
		s := lw.newRule(rule)
		add(s, []elem{x, {kind: kRef, arg: int32(s)}})
		add(s, nil)
		*seq = append(*seq, elem{kind: kRef, arg: int32(s)})
		return
	}
	if n.max-n.min > MaxElements/4 {
		lw.err = fmt.Errorf("grammar: a repetition of up to %d is too large", n.max)
		return
	}
	prev := -1
	for k := 1; k <= n.max-n.min; k++ {
		o := lw.newRule(rule)
		if prev < 0 {
			add(o, []elem{x})
		} else {
			add(o, []elem{x, {kind: kRef, arg: int32(prev)}})
		}
		add(o, nil)
		prev = o
		if len(lw.g.elems) > MaxElements {
			lw.err = fmt.Errorf("grammar: more than %d elements", MaxElements)
			return
		}
	}
	if prev >= 0 {
		*seq = append(*seq, elem{kind: kRef, arg: int32(prev)})
	}
}

// checkLeftRecursion refuses rules that can reach themselves without
// consuming a byte: the parser would expand them forever.
func (g *Grammar) checkLeftRecursion() error {
	n := len(g.rules)
	nullable := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for r, alts := range g.rules {
			if nullable[r] {
				continue
			}
			for _, a := range alts {
				if g.nullableFrom(a, nullable) {
					nullable[r], changed = true, true
					break
				}
			}
		}
	}
	// Edges r -> s where s can start r without a byte consumed.
	edges := make([][]int32, n)
	for r, alts := range g.rules {
		for _, a := range alts {
			for p := a; g.elems[p].kind == kRef; p++ {
				s := g.elems[p].arg
				edges[r] = append(edges[r], s)
				if !nullable[s] {
					break
				}
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, n)
	type frame struct {
		r int32
		i int
	}
	for start := range n {
		if color[start] != white {
			continue
		}
		stack := []frame{{int32(start), 0}}
		color[start] = grey
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.i == len(edges[f.r]) {
				color[f.r] = black
				stack = stack[:len(stack)-1]
				continue
			}
			s := edges[f.r][f.i]
			f.i++
			switch color[s] {
			case grey:
				return fmt.Errorf("grammar: rule %q is left-recursive (it can reach itself before matching anything)", g.displayName(s))
			case white:
				color[s] = grey
				stack = append(stack, frame{s, 0})
			}
		}
	}
	return nil
}

func (g *Grammar) nullableFrom(p int32, nullable []bool) bool {
	for ; ; p++ {
		switch e := g.elems[p]; e.kind {
		case kEnd:
			return true
		case kSet:
			return false
		case kRef:
			if !nullable[e.arg] {
				return false
			}
		}
	}
}

// displayName is the user's rule name for a helper rule's owner.
func (g *Grammar) displayName(r int32) string {
	name := g.names[r]
	if i := strings.IndexByte(name, '#'); i >= 0 {
		return name[:i]
	}
	return name
}

// Embed returns an expression that matches the sentences of a compiled
// grammar, for use in a larger grammar being built: g's rules are copied
// into b under fresh names.
func (b *Builder) Embed(g *Grammar) *Node {
	names := make([]string, len(g.rules))
	for r := range g.rules {
		names[r] = b.Fresh("embed-" + sanitize(g.names[r]))
		b.Rule(names[r])
	}
	for r, alts := range g.rules {
		choices := make([]*Node, len(alts))
		for i, p := range alts {
			var seq []*Node
			for ; g.elems[p].kind != kEnd; p++ {
				e := g.elems[p]
				if e.kind == kSet {
					seq = append(seq, &Node{op: opBytes, set: g.sets[e.arg]})
				} else {
					seq = append(seq, b.Ref(names[e.arg]))
				}
			}
			choices[i] = Seq(seq...)
		}
		b.Define(names[r], Alt(choices...))
	}
	return b.Ref(names[g.root])
}

// NotContaining matches any bytes in which m (not empty) does not occur.
// Its rules follow the states of a string search for m (how much of m the
// text ends with), so it costs one automaton state per byte of m, and a
// repetition of it does not grow the parse stack.
func (b *Builder) NotContaining(m string) *Node {
	if m == "" {
		panic("grammar: NotContaining an empty string")
	}
	// fail[k]: the longest proper border of m[:k].
	fail := make([]int, len(m)+1)
	for k := 2; k <= len(m); k++ {
		j := fail[k-1]
		for j > 0 && m[j] != m[k-1] {
			j = fail[j]
		}
		if m[j] == m[k-1] {
			j++
		}
		fail[k] = j
	}
	next := func(k int, c byte) int {
		for k > 0 && m[k] != c {
			k = fail[k]
		}
		if m[k] == c {
			k++
		}
		return k
	}
	prefix := b.Fresh("not-containing")
	b.Rule(prefix) // taken, so that the next Fresh names another
	names := make([]string, len(m))
	for k := 0; k < len(m); k++ {
		names[k] = fmt.Sprintf("%s-%d", prefix, k)
		b.Rule(names[k])
	}
	for k := 0; k < len(m); k++ {
		sets := make([]byteSet, len(m))
		for c := range 256 {
			if j := next(k, byte(c)); j < len(m) {
				sets[j].add(byte(c))
			}
		}
		alts := []*Node{Empty()}
		for j, set := range sets {
			if !set.empty() {
				alts = append(alts, Seq(&Node{op: opBytes, set: set}, b.Ref(names[j])))
			}
		}
		b.Define(names[k], Alt(alts...))
	}
	return b.Ref(names[0])
}
