package grammar

import (
	"fmt"
	"math"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// SchemaError is a JSON Schema that braid cannot enforce, or that is not a
// schema: where (a JSON pointer into the schema, "" for its root), the
// keyword, and why. A server answers it with 400.
type SchemaError struct {
	Path    string
	Keyword string
	Msg     string
}

func (e *SchemaError) Error() string {
	where := e.Path
	if where == "" {
		where = "the root"
	}
	if e.Keyword != "" {
		return fmt.Sprintf("schema at %s: %q: %s", where, e.Keyword, e.Msg)
	}
	return fmt.Sprintf("schema at %s: %s", where, e.Msg)
}

func schemaErr(path, kw, format string, a ...any) *SchemaError {
	return &SchemaError{Path: path, Keyword: kw, Msg: fmt.Sprintf(format, a...)}
}

// annotations are keywords that constrain nothing; they are accepted and
// ignored.
var annotations = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true, "$schema": true, "$id": true,
	"$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true, "$defs": true, "definitions": true,
	"contentEncoding": true, "contentMediaType": true, "discriminator": true, "$anchor": true, "strict": true,
}

// supported are the validation keywords the compiler enforces.
var supported = map[string]bool{
	"type": true, "enum": true, "const": true, "$ref": true, "anyOf": true, "oneOf": true, "allOf": true, "nullable": true,
	"properties": true, "required": true, "additionalProperties": true, "minProperties": true, "maxProperties": true,
	"items": true, "prefixItems": true, "additionalItems": true, "minItems": true, "maxItems": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
}

// Limits on what a schema may ask for.
const (
	maxStringLength = 10000 // minLength / maxLength
	maxArrayLength  = 1000  // minItems / maxItems
	maxBound        = 1e15  // |minimum|, |maximum|
	maxSchemaNodes  = 10000 // schema objects visited
)

// SchemaCompiler turns JSON Schemas into grammar expressions on a Builder,
// so that a schema can be a part of a larger grammar (a tool call's
// arguments). Rules it adds are named with its prefix.
//
// What it generates is always valid for the schema; it may be a strict
// subset of the valid values: properties come in the schema's order, extra
// properties are not generated, integers have at most 16 digits and
// fractions at most 16, some escapes are not used. What it cannot
// guarantee it refuses with a *SchemaError naming the keyword: not, if,
// multipleOf, uniqueItems, patternProperties, a oneOf whose alternatives it
// cannot prove exclusive, and so on.
type SchemaCompiler struct {
	b      *Builder
	prefix string
	root   *Value
	refs   map[string]string // JSON pointer -> rule name
	nodes  int
	WS     *Node // whitespace allowed between tokens
}

// NewSchemaCompiler returns a compiler adding rules to b.
func NewSchemaCompiler(b *Builder, prefix string) *SchemaCompiler {
	c := &SchemaCompiler{b: b, prefix: prefix, refs: map[string]string{}}
	c.WS = c.common("ws", func() *Node {
		return Opt(Alt(Lit(" "), Seq(Lit("\n"), Repeat(charSet(" \t"), 0, 20))))
	})
	return c
}

// CompileSchema compiles a JSON Schema (the bytes of a JSON document) into
// a grammar of the JSON texts valid for it.
func CompileSchema(schema []byte) (*Grammar, error) {
	v, err := ParseValue(schema)
	if err != nil {
		return nil, &SchemaError{Msg: fmt.Sprintf("not valid JSON: %v", err)}
	}
	b := NewBuilder()
	c := NewSchemaCompiler(b, "")
	n, err := c.Compile(v)
	if err != nil {
		return nil, err
	}
	b.Define("root", n)
	return b.Build("root")
}

// JSONGrammar is the grammar of any JSON value, or of any JSON object with
// objectOnly (OpenAI's json_object response format).
func JSONGrammar(objectOnly bool) *Grammar {
	b := NewBuilder()
	c := NewSchemaCompiler(b, "")
	if objectOnly {
		b.Define("root", c.AnyObject())
	} else {
		b.Define("root", c.AnyValue())
	}
	g, err := b.Build("root")
	if err != nil {
		panic(err)
	}
	return g
}

// Compile returns an expression for the values valid for schema, which is
// also the document its local $refs point into.
func (c *SchemaCompiler) Compile(schema *Value) (*Node, error) {
	c.root = schema
	return c.schema(schema, "")
}

func charSet(chars string) *Node {
	n := &Node{op: opBytes}
	for i := 0; i < len(chars); i++ {
		n.set.add(chars[i])
	}
	return n
}

// common defines a shared rule once per builder and refers to it.
func (c *SchemaCompiler) common(name string, body func() *Node) *Node {
	full := c.prefix + "json-" + name
	if !c.b.Defined(full) {
		c.b.Rule(full)
		c.b.Define(full, Empty()) // placeholder: bodies may refer back
		c.b.Define(full, body())
	}
	return c.b.Ref(full)
}

// Char is one character of a JSON string's contents: a code point other
// than '"', '\' and controls, or an escape (no \u for surrogates).
func (c *SchemaCompiler) Char() *Node {
	return c.common("char", func() *Node {
		hex := Class([]RuneRange{{'0', '9'}, {'a', 'f'}, {'A', 'F'}}, false)
		// \u escapes of every BMP code point but the surrogates.
		uesc := Alt(
			Seq(Class([]RuneRange{{'0', '9'}, {'a', 'c'}, {'A', 'C'}, {'e', 'f'}, {'E', 'F'}}, false), hex, hex, hex),
			Seq(charSet("dD"), ByteRange('0', '7'), hex, hex),
		)
		return Alt(
			Class([]RuneRange{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true),
			Seq(Lit(`\`), Alt(charSet(`"\/bfnrt`), Seq(Lit("u"), uesc))),
		)
	})
}

// String is any JSON string.
func (c *SchemaCompiler) String() *Node {
	return c.common("string", func() *Node { return Seq(Lit(`"`), Star(c.Char()), Lit(`"`)) })
}

// Number is any JSON number (at most 16 integer and 16 fraction digits,
// exponents of at most 3 digits).
func (c *SchemaCompiler) Number() *Node {
	return c.common("number", func() *Node {
		return Seq(c.Integer(), Opt(Seq(Lit("."), Repeat(ByteRange('0', '9'), 1, 16))),
			Opt(Seq(charSet("eE"), Opt(charSet("+-")), Repeat(ByteRange('0', '9'), 1, 3))))
	})
}

// Integer is a JSON integer of at most 16 digits.
func (c *SchemaCompiler) Integer() *Node {
	return c.common("integer", func() *Node {
		return Seq(Opt(Lit("-")), Alt(Lit("0"), Seq(ByteRange('1', '9'), Repeat(ByteRange('0', '9'), 0, 15))))
	})
}

// AnyValue is any JSON value.
func (c *SchemaCompiler) AnyValue() *Node {
	return c.common("value", func() *Node {
		return Alt(c.AnyObject(), c.anyArray(), c.String(), c.Number(), Lit("true"), Lit("false"), Lit("null"))
	})
}

// AnyObject is any JSON object.
func (c *SchemaCompiler) AnyObject() *Node {
	return c.common("object", func() *Node { return c.freeObject(c.AnyValue(), 0, -1) })
}

func (c *SchemaCompiler) anyArray() *Node {
	return c.common("array", func() *Node { return c.list(c.AnyValue(), 0, -1) })
}

// freeObject is an object of any keys whose values are val, with between
// min and max members (max < 0: any).
func (c *SchemaCompiler) freeObject(val *Node, min, max int) *Node {
	pair := Seq(c.String(), c.WS, Lit(":"), c.WS, val)
	return c.list0("{", "}", pair, min, max)
}

// list is a JSON array of items, between min and max of them.
func (c *SchemaCompiler) list(item *Node, min, max int) *Node {
	return c.list0("[", "]", item, min, max)
}

func (c *SchemaCompiler) list0(open, close string, item *Node, min, max int) *Node {
	sep := Seq(c.WS, Lit(","), c.WS)
	var more *Node
	if max < 0 {
		more = Repeat(Seq(sep, item), max0(min-1), -1)
	} else {
		more = Repeat(Seq(sep, item), max0(min-1), max-1)
	}
	items := Seq(item, more, c.WS)
	if max == 0 {
		return Seq(Lit(open), c.WS, Lit(close))
	}
	if min == 0 {
		return Seq(Lit(open), c.WS, Opt(items), Lit(close))
	}
	return Seq(Lit(open), c.WS, items, Lit(close))
}

func max0(n int) int { return max(n, 0) }

func (c *SchemaCompiler) schema(s *Value, path string) (*Node, error) {
	if c.nodes++; c.nodes > maxSchemaNodes {
		return nil, schemaErr(path, "", "the schema has more than %d subschemas", maxSchemaNodes)
	}
	switch s.Kind {
	case "boolean":
		if s.Bool {
			return c.AnyValue(), nil
		}
		return nil, schemaErr(path, "", "the schema false allows no value")
	case "object":
	default:
		return nil, schemaErr(path, "", "a schema must be an object or a boolean, not %s", s.Kind)
	}
	for _, k := range s.Keys {
		if annotations[k] || supported[k] || strings.HasPrefix(k, "x-") {
			continue
		}
		return nil, schemaErr(path, k, "keyword not supported: braid cannot enforce it")
	}
	if s.Get("nullable") != nil && s.Get("nullable").Kind == "boolean" && s.Get("nullable").Bool {
		// OpenAPI's nullable: the schema, or null.
		rest := without(s, "nullable")
		n, err := c.schema(rest, path)
		if err != nil {
			return nil, err
		}
		return Alt(n, Lit("null")), nil
	}
	if ref := s.Get("$ref"); ref != nil {
		if k := otherKeyword(s, "$ref"); k != "" {
			return nil, schemaErr(path, k, "keyword beside $ref is not supported; put both under allOf... or move it into the referenced schema")
		}
		return c.ref(ref, path)
	}
	if s.Get("const") != nil || s.Get("enum") != nil {
		return c.enum(s, path)
	}
	for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
		if s.Get(kw) != nil {
			return c.combination(s, kw, path)
		}
	}
	types, err := schemaTypes(s, path)
	if err != nil {
		return nil, err
	}
	var alts []*Node
	for _, t := range types {
		var n *Node
		var err error
		switch t {
		case "null":
			n = Lit("null")
		case "boolean":
			n = Alt(Lit("true"), Lit("false"))
		case "string":
			n, err = c.str(s, path)
		case "integer":
			n, err = c.integer(s, path)
		case "number":
			n, err = c.number(s, path)
		case "array":
			n, err = c.array(s, path)
		case "object":
			n, err = c.object(s, path)
		}
		if err != nil {
			return nil, err
		}
		alts = append(alts, n)
	}
	if len(alts) == 0 {
		return c.AnyValue(), nil
	}
	return Alt(alts...), nil
}

// without is s minus the keywords kws.
func without(s *Value, kws ...string) *Value {
	out := &Value{Kind: "object", Obj: map[string]*Value{}}
	for _, k := range s.Keys {
		if slices.Contains(kws, k) {
			continue
		}
		out.Keys = append(out.Keys, k)
		out.Obj[k] = s.Obj[k]
	}
	return out
}

// otherKeyword is a validation keyword of s besides those named, or "".
func otherKeyword(s *Value, allowed ...string) string {
	for _, k := range s.Keys {
		if !annotations[k] && !slices.Contains(allowed, k) && !strings.HasPrefix(k, "x-") {
			return k
		}
	}
	return ""
}

var typeKeywords = map[string][]string{
	"object":  {"properties", "required", "additionalProperties", "minProperties", "maxProperties"},
	"array":   {"items", "prefixItems", "additionalItems", "minItems", "maxItems"},
	"string":  {"minLength", "maxLength", "pattern", "format"},
	"number":  {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
	"integer": nil,
	"boolean": nil,
	"null":    nil,
}

// schemaTypes reads "type" (a name or a list), or, without it, the types
// whose keywords the schema uses (no keywords: none, meaning any value).
func schemaTypes(s *Value, path string) ([]string, error) {
	t := s.Get("type")
	if t == nil {
		var out []string
		for _, name := range []string{"object", "array", "string", "number"} {
			for _, kw := range typeKeywords[name] {
				if s.Get(kw) != nil {
					out = append(out, name)
					break
				}
			}
		}
		return out, nil
	}
	var names []string
	switch t.Kind {
	case "string":
		names = []string{t.Str}
	case "array":
		for _, e := range t.Arr {
			if e.Kind != "string" {
				return nil, schemaErr(path, "type", "must be a type name or a list of them")
			}
			names = append(names, e.Str)
		}
	default:
		return nil, schemaErr(path, "type", "must be a type name or a list of them")
	}
	if len(names) == 0 {
		return nil, schemaErr(path, "type", "an empty list of types allows no value")
	}
	for _, n := range names {
		if _, ok := typeKeywords[n]; !ok {
			return nil, schemaErr(path, "type", "unknown type %q (not one of null, boolean, object, array, number, string, integer)", n)
		}
	}
	// "number" includes the integers; listing both adds nothing.
	if slices.Contains(names, "number") {
		names = slices.DeleteFunc(names, func(n string) bool { return n == "integer" })
	}
	return slices.Compact(names), nil
}

func (c *SchemaCompiler) ref(ref *Value, path string) (*Node, error) {
	if ref.Kind != "string" {
		return nil, schemaErr(path, "$ref", "must be a string")
	}
	ptr := ref.Str
	if !strings.HasPrefix(ptr, "#") {
		return nil, schemaErr(path, "$ref", "only references into the same schema (#/...) are supported, not %q", ptr)
	}
	if name, ok := c.refs[ptr]; ok {
		return c.b.Ref(name), nil
	}
	target, err := resolvePointer(c.root, ptr)
	if err != nil {
		return nil, schemaErr(path, "$ref", "%v", err)
	}
	name := c.b.Fresh(c.prefix + "ref" + sanitize(ptr[1:]))
	c.refs[ptr] = name
	c.b.Rule(name)
	body, err := c.schema(target, ptr[1:])
	if err != nil {
		return nil, err
	}
	c.b.Define(name, body)
	return c.b.Ref(name), nil
}

func sanitize(s string) string {
	var sb strings.Builder
	for _, r := range s {
		if r < 128 && isWordByte(byte(r)) {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('-')
		}
	}
	return sb.String()
}

func resolvePointer(root *Value, ptr string) (*Value, error) {
	frag, err := url.PathUnescape(ptr[1:])
	if err != nil {
		return nil, fmt.Errorf("bad reference %q: %v", ptr, err)
	}
	v := root
	if frag == "" {
		return v, nil
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, fmt.Errorf("reference %q: only JSON pointers (#/...) are supported, not anchors", ptr)
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v.Kind {
		case "object":
			next, ok := v.Obj[tok]
			if !ok {
				return nil, fmt.Errorf("reference %q: no %q", ptr, tok)
			}
			v = next
		case "array":
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v.Arr) {
				return nil, fmt.Errorf("reference %q: no element %q", ptr, tok)
			}
			v = v.Arr[i]
		default:
			return nil, fmt.Errorf("reference %q leads into a %s", ptr, v.Kind)
		}
	}
	return v, nil
}

// enum generates the values of const or enum that the rest of the schema
// allows.
func (c *SchemaCompiler) enum(s *Value, path string) (*Node, error) {
	var vals []*Value
	kw := "enum"
	if k := s.Get("const"); k != nil {
		kw = "const"
		vals = []*Value{k}
	} else {
		e := s.Get("enum")
		if e.Kind != "array" {
			return nil, schemaErr(path, "enum", "must be a list of values")
		}
		vals = e.Arr
	}
	rest := without(s, "enum", "const")
	var alts []*Node
	for _, v := range vals {
		if err := validate(v, rest, c.root, path, 0); err == nil {
			alts = append(alts, Lit(v.Encode()))
		} else if _, unsupported := err.(*SchemaError); unsupported {
			return nil, err
		}
	}
	if len(alts) == 0 {
		return nil, schemaErr(path, kw, "no value of it is valid for the rest of the schema")
	}
	return Alt(alts...), nil
}

func (c *SchemaCompiler) combination(s *Value, kw, path string) (*Node, error) {
	list := s.Get(kw)
	if list.Kind != "array" || len(list.Arr) == 0 {
		return nil, schemaErr(path, kw, "must be a non-empty list of schemas")
	}
	if k := otherKeyword(s, kw); k != "" {
		return nil, schemaErr(path, k, "keyword beside %s is not supported; move it into each alternative", kw)
	}
	if kw == "allOf" {
		if len(list.Arr) != 1 {
			return nil, schemaErr(path, kw, "allOf with %d schemas is not supported (only one)", len(list.Arr))
		}
		return c.schema(list.Arr[0], path+"/allOf/0")
	}
	if kw == "oneOf" {
		for i := range list.Arr {
			for j := i + 1; j < len(list.Arr); j++ {
				if !c.exclusive(list.Arr[i], list.Arr[j]) {
					return nil, schemaErr(path, kw, "alternatives %d and %d may both match a value, which oneOf forbids and braid cannot rule out; use anyOf, or give each alternative a distinct type or a const property", i, j)
				}
			}
		}
	}
	alts := make([]*Node, len(list.Arr))
	for i, sub := range list.Arr {
		n, err := c.schema(sub, fmt.Sprintf("%s/%s/%d", path, kw, i))
		if err != nil {
			return nil, err
		}
		alts[i] = n
	}
	return Alt(alts...), nil
}

// exclusive reports whether no value can match both schemas, as far as a
// cheap look can tell: different types, or a property both require with
// const or enum values in common to neither.
func (c *SchemaCompiler) exclusive(a, b *Value) bool {
	a, b = c.deref(a), c.deref(b)
	if a == nil || b == nil || a.Kind != "object" || b.Kind != "object" {
		return false
	}
	ta, _ := schemaTypes(a, "")
	tb, _ := schemaTypes(b, "")
	if ta != nil && tb != nil && !typesOverlap(ta, tb) {
		return true
	}
	if va, vb := constValues(a), constValues(b); va != nil && vb != nil && disjointValues(va, vb) {
		return true
	}
	pa, pb := a.Get("properties"), b.Get("properties")
	if pa == nil || pb == nil || pa.Kind != "object" || pb.Kind != "object" {
		return false
	}
	for _, k := range pa.Keys {
		if !requires(a, k) || !requires(b, k) {
			continue
		}
		sa, sb := c.deref(pa.Obj[k]), c.deref(pb.Obj[k])
		if sa == nil || sb == nil {
			continue
		}
		va, vb := constValues(sa), constValues(sb)
		if va != nil && vb != nil && disjointValues(va, vb) {
			return true
		}
	}
	return false
}

func (c *SchemaCompiler) deref(s *Value) *Value {
	for range 16 {
		if s == nil || s.Kind != "object" || s.Get("$ref") == nil || s.Get("$ref").Kind != "string" {
			return s
		}
		t, err := resolvePointer(c.root, s.Get("$ref").Str)
		if err != nil {
			return nil
		}
		s = t
	}
	return nil
}

func typesOverlap(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y || (x == "number" && y == "integer") || (x == "integer" && y == "number") {
				return true
			}
		}
	}
	return false
}

func requires(s *Value, k string) bool {
	r := s.Get("required")
	if r == nil || r.Kind != "array" {
		return false
	}
	for _, e := range r.Arr {
		if e.Kind == "string" && e.Str == k {
			return true
		}
	}
	return false
}

func constValues(s *Value) []*Value {
	if k := s.Get("const"); k != nil {
		return []*Value{k}
	}
	if e := s.Get("enum"); e != nil && e.Kind == "array" {
		return e.Arr
	}
	return nil
}

func disjointValues(a, b []*Value) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Equal(y) {
				return false
			}
		}
	}
	return true
}

// intKeyword reads a non-negative integer keyword, -1 when absent.
func intKeyword(s *Value, kw, path string, limit int) (int, error) {
	v := s.Get(kw)
	if v == nil {
		return -1, nil
	}
	if v.Kind != "number" {
		return 0, schemaErr(path, kw, "must be a non-negative integer")
	}
	r, ok := v.rat()
	if !ok || !r.IsInt() || r.Sign() < 0 {
		return 0, schemaErr(path, kw, "must be a non-negative integer, not %s", v.Num)
	}
	if r.Cmp(big.NewRat(int64(limit), 1)) > 0 {
		return 0, schemaErr(path, kw, "%s is above the largest supported, %d", v.Num, limit)
	}
	return int(r.Num().Int64()), nil
}

func (c *SchemaCompiler) str(s *Value, path string) (*Node, error) {
	minL, err := intKeyword(s, "minLength", path, maxStringLength)
	if err != nil {
		return nil, err
	}
	maxL, err := intKeyword(s, "maxLength", path, maxStringLength)
	if err != nil {
		return nil, err
	}
	if maxL >= 0 && minL > maxL {
		return nil, schemaErr(path, "minLength", "%d is above maxLength %d", minL, maxL)
	}
	pattern, format := s.Get("pattern"), s.Get("format")
	if pattern != nil || format != nil {
		kw := "pattern"
		if pattern == nil {
			kw = "format"
		}
		if pattern != nil && format != nil {
			return nil, schemaErr(path, "format", "format together with pattern is not supported")
		}
		if minL >= 0 || maxL >= 0 {
			return nil, schemaErr(path, kw, "%s together with minLength or maxLength is not supported", kw)
		}
		v := s.Get(kw)
		if v.Kind != "string" {
			return nil, schemaErr(path, kw, "must be a string")
		}
		var body *Node
		if pattern != nil {
			body, err = regexBody(v.Str)
		} else {
			body, err = formatBody(v.Str)
		}
		if err != nil {
			return nil, schemaErr(path, kw, "%v", err)
		}
		return Seq(Lit(`"`), body, Lit(`"`)), nil
	}
	if minL <= 0 && maxL < 0 {
		return c.String(), nil
	}
	return Seq(Lit(`"`), Repeat(c.Char(), max0(minL), maxL), Lit(`"`)), nil
}

// bound is one end of a numeric range.
type bound struct {
	set  bool
	v    *big.Rat
	excl bool
}

// numBounds reads minimum, maximum and the exclusive forms (numbers, or
// draft 4's booleans beside minimum/maximum).
func numBounds(s *Value, path string) (lo, hi bound, err error) {
	read := func(kw string) (*big.Rat, error) {
		v := s.Get(kw)
		if v == nil || v.Kind == "boolean" {
			return nil, nil
		}
		if v.Kind != "number" {
			return nil, schemaErr(path, kw, "must be a number")
		}
		r, ok := v.rat()
		if !ok {
			return nil, schemaErr(path, kw, "unreadable number %s", v.Num)
		}
		if f, _ := r.Float64(); math.Abs(f) > maxBound {
			return nil, schemaErr(path, kw, "%s is beyond the supported magnitude %g", v.Num, maxBound)
		}
		return r, nil
	}
	var min, max, emin, emax *big.Rat
	if min, err = read("minimum"); err != nil {
		return
	}
	if max, err = read("maximum"); err != nil {
		return
	}
	if emin, err = read("exclusiveMinimum"); err != nil {
		return
	}
	if emax, err = read("exclusiveMaximum"); err != nil {
		return
	}
	draft4 := func(kw string) bool { v := s.Get(kw); return v != nil && v.Kind == "boolean" && v.Bool }
	if min != nil {
		lo = bound{true, min, draft4("exclusiveMinimum")}
	}
	if emin != nil && (!lo.set || emin.Cmp(lo.v) >= 0) {
		lo = bound{true, emin, true}
	}
	if max != nil {
		hi = bound{true, max, draft4("exclusiveMaximum")}
	}
	if emax != nil && (!hi.set || emax.Cmp(hi.v) <= 0) {
		hi = bound{true, emax, true}
	}
	return lo, hi, nil
}

func ratInt(r *big.Rat, ceil bool) int64 {
	q := new(big.Int).Quo(r.Num(), r.Denom()) // truncates toward zero
	if !r.IsInt() {
		if ceil && r.Sign() > 0 {
			q.Add(q, big.NewInt(1))
		}
		if !ceil && r.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		}
	}
	return q.Int64()
}

// integerLimit bounds integers where the schema does not: 16 digits.
const integerLimit = 9999999999999999

func (c *SchemaCompiler) integer(s *Value, path string) (*Node, error) {
	lo, hi, err := numBounds(s, path)
	if err != nil {
		return nil, err
	}
	if !lo.set && !hi.set {
		return c.Integer(), nil
	}
	a, b := int64(-integerLimit), int64(integerLimit)
	if lo.set {
		a = ratInt(lo.v, true)
		if lo.excl && lo.v.IsInt() {
			a++
		}
	}
	if hi.set {
		b = ratInt(hi.v, false)
		if hi.excl && hi.v.IsInt() {
			b--
		}
	}
	if a > b {
		return nil, schemaErr(path, "minimum", "no integer lies between the bounds")
	}
	return intRange(a, b), nil
}

// intRange matches the integers in [a, b] as JSON writes them.
func intRange(a, b int64) *Node {
	var alts []*Node
	if a < 0 {
		alts = append(alts, Seq(Lit("-"), natRange(max(1, -min(b, -1)), -a)))
	}
	if b >= 0 {
		alts = append(alts, natRange(max(a, 0), b))
	}
	return Alt(alts...)
}

// natRange matches the decimal numerals (no leading zeros) of the
// integers in [a, b], 0 <= a <= b.
func natRange(a, b int64) *Node {
	sa, sb := strconv.FormatInt(a, 10), strconv.FormatInt(b, 10)
	var alts []*Node
	for l := len(sa); l <= len(sb); l++ {
		lo, hi := sa, sb
		if l > len(sa) {
			lo = "1" + strings.Repeat("0", l-1)
		}
		if l < len(sb) {
			hi = strings.Repeat("9", l)
		}
		alts = append(alts, digitRange(lo, hi))
	}
	return Alt(alts...)
}

// digitRange matches the digit strings of one length between lo and hi
// (same length, lo <= hi), leading zeros included.
func digitRange(lo, hi string) *Node {
	if lo == hi {
		return Lit(lo)
	}
	if len(lo) == 1 {
		return ByteRange(lo[0], hi[0])
	}
	if strings.Trim(lo, "0") == "" && strings.Trim(hi, "9") == "" {
		return Repeat(ByteRange('0', '9'), len(lo), len(lo))
	}
	if lo[0] == hi[0] {
		return Seq(Lit(lo[:1]), digitRange(lo[1:], hi[1:]))
	}
	n := len(lo) - 1
	nines, zeros := strings.Repeat("9", n), strings.Repeat("0", n)
	alts := []*Node{Seq(Lit(lo[:1]), digitRange(lo[1:], nines))}
	if hi[0]-lo[0] > 1 {
		alts = append(alts, Seq(ByteRange(lo[0]+1, hi[0]-1), Repeat(ByteRange('0', '9'), n, n)))
	}
	alts = append(alts, Seq(Lit(hi[:1]), digitRange(zeros, hi[1:])))
	return Alt(alts...)
}

// number with bounds: the bounds must be integers, and no exponent is
// generated. A numeral I.F (or I) without a sign has a value in [I, I+1),
// exactly I when F is all zeros; a negative one is the mirror image.
func (c *SchemaCompiler) number(s *Value, path string) (*Node, error) {
	lo, hi, err := numBounds(s, path)
	if err != nil {
		return nil, err
	}
	if !lo.set && !hi.set {
		return c.Number(), nil
	}
	for _, b := range []struct {
		kw string
		b  bound
	}{{"minimum", lo}, {"maximum", hi}} {
		if b.b.set && !b.b.v.IsInt() {
			return nil, schemaErr(path, b.kw, "a bound of %s is not supported for numbers: only integer bounds are enforced", b.b.v.FloatString(6))
		}
	}
	type ib struct {
		set  bool
		v    int64
		excl bool
	}
	l, h := ib{lo.set, 0, lo.excl}, ib{hi.set, 0, hi.excl}
	if lo.set {
		l.v = lo.v.Num().Int64()
	}
	if hi.set {
		h.v = hi.v.Num().Int64()
	}
	if l.set && h.set && (l.v > h.v || l.v == h.v && (l.excl || h.excl)) {
		return nil, schemaErr(path, "minimum", "no number lies between the bounds")
	}
	var alts []*Node
	// Non-negative numerals: values in [max(lo, 0), hi].
	if !h.set || h.v > 0 || h.v == 0 && !h.excl {
		nl := ib{true, 0, false}
		if l.set && l.v >= 0 {
			nl = l
		}
		if n := unsignedRange(nl.v, nl.excl, h.set, h.v, h.excl); n != nil {
			alts = append(alts, n)
		}
	}
	// Negative numerals -W: W in [max(-hi, 0), -lo], W > 0.
	if !l.set || l.v < 0 {
		wl := ib{true, 0, true}
		if h.set && h.v < 0 {
			wl = ib{true, -h.v, h.excl}
		}
		wh := ib{l.set, -l.v, l.excl}
		if n := unsignedRange(wl.v, wl.excl, wh.set, wh.v, wh.excl); n != nil {
			alts = append(alts, Seq(Lit("-"), n))
		}
	}
	if len(alts) == 0 {
		return nil, schemaErr(path, "minimum", "no number lies between the bounds")
	}
	return Alt(alts...), nil
}

// unsignedRange matches numerals I or I.F (up to 16 fraction digits) whose
// value w has lo <= w (lo < w with loExcl) and, when hiSet, w <= hi (w < hi
// with hiExcl); 0 <= lo; lo and hi are integers. nil when none.
func unsignedRange(lo int64, loExcl, hiSet bool, hi int64, hiExcl bool) *Node {
	digit := ByteRange('0', '9')
	anyFrac := Opt(Seq(Lit("."), Repeat(digit, 1, 16)))
	zeroFrac := Opt(Seq(Lit("."), Repeat(Lit("0"), 1, 16)))
	nonzeroFrac := Seq(Lit("."), Repeat(Lit("0"), 0, 15), ByteRange('1', '9'), Repeat(digit, 0, 15))
	var alts []*Node
	// I == lo: any fraction, or a non-zero one when lo is excluded; its
	// values reach lo+1 (exclusive), within hi when lo+1 <= hi.
	inner := !hiSet || lo+1 <= hi
	if inner {
		if loExcl {
			alts = append(alts, Seq(natRange(lo, lo), nonzeroFrac))
		} else {
			alts = append(alts, Seq(natRange(lo, lo), anyFrac))
		}
	} else if !loExcl && (!hiSet || lo < hi || lo == hi && !hiExcl) {
		// lo == hi: only the integer itself.
		alts = append(alts, Seq(natRange(lo, lo), zeroFrac))
	}
	// lo < I < hi: any fraction.
	switch {
	case !hiSet:
		if lo+1 <= integerLimit {
			alts = append(alts, Seq(natRange(lo+1, integerLimit), anyFrac))
		}
	case lo+1 <= hi-1:
		alts = append(alts, Seq(natRange(lo+1, hi-1), anyFrac))
	}
	// I == hi (> lo): only with a zero fraction, and only if hi is included.
	if hiSet && hi > lo && !hiExcl {
		alts = append(alts, Seq(natRange(hi, hi), zeroFrac))
	}
	if len(alts) == 0 {
		return nil
	}
	return Alt(alts...)
}

func (c *SchemaCompiler) array(s *Value, path string) (*Node, error) {
	minI, err := intKeyword(s, "minItems", path, maxArrayLength)
	if err != nil {
		return nil, err
	}
	maxI, err := intKeyword(s, "maxItems", path, maxArrayLength)
	if err != nil {
		return nil, err
	}
	minI = max0(minI)
	if maxI >= 0 && minI > maxI {
		return nil, schemaErr(path, "minItems", "%d is above maxItems %d", minI, maxI)
	}
	// The tuple: prefixItems (or draft 7's list-valued items), then the
	// items schema (or draft 7's additionalItems) for the rest.
	var prefix []*Value
	var rest *Value // nil: any value
	restAllowed := true
	items, pre, addl := s.Get("items"), s.Get("prefixItems"), s.Get("additionalItems")
	restKw := "items"
	switch {
	case pre != nil:
		if pre.Kind != "array" {
			return nil, schemaErr(path, "prefixItems", "must be a list of schemas")
		}
		prefix, rest = pre.Arr, items
	case items != nil && items.Kind == "array":
		prefix, rest, restKw = items.Arr, addl, "additionalItems"
	default:
		rest = items
	}
	if rest != nil && rest.Kind == "boolean" && !rest.Bool {
		restAllowed, rest = false, nil
	}
	if !restAllowed && minI > len(prefix) {
		return nil, schemaErr(path, "minItems", "%d items are required but only %d are allowed", minI, len(prefix))
	}
	if !restAllowed && (maxI < 0 || maxI > len(prefix)) {
		maxI = len(prefix)
	}
	elem := func(i int) (*Node, error) {
		if i < len(prefix) {
			return c.schema(prefix[i], fmt.Sprintf("%s/prefixItems/%d", path, i))
		}
		if rest == nil {
			return c.AnyValue(), nil
		}
		return c.schema(rest, path+"/"+restKw)
	}
	if len(prefix) == 0 {
		item, err := elem(0)
		if err != nil {
			return nil, err
		}
		return c.list(item, minI, maxI), nil
	}
	// Positions 0..k-1 are distinct; the list may stop after minItems.
	// tail(i) is what may follow element i-1: nothing, or more.
	sep := Seq(c.WS, Lit(","), c.WS)
	k := len(prefix)
	var tail func(i int) (*Node, error)
	tail = func(i int) (*Node, error) {
		if maxI >= 0 && i >= maxI {
			return Empty(), nil
		}
		if i >= k {
			if !restAllowed {
				return Empty(), nil
			}
			item, err := elem(i)
			if err != nil {
				return nil, err
			}
			more := -1
			if maxI >= 0 {
				more = maxI - i
			}
			return Repeat(Seq(sep, item), max0(minI-i), more), nil
		}
		e, err := elem(i)
		if err != nil {
			return nil, err
		}
		next, err := tail(i + 1)
		if err != nil {
			return nil, err
		}
		n := Seq(sep, e, next)
		if i >= minI {
			return Opt(n), nil
		}
		return n, nil
	}
	if maxI == 0 {
		return Seq(Lit("["), c.WS, Lit("]")), nil
	}
	first, err := elem(0)
	if err != nil {
		return nil, err
	}
	rest1, err := tail(1)
	if err != nil {
		return nil, err
	}
	items1 := Seq(first, rest1, c.WS)
	if minI == 0 {
		return Seq(Lit("["), c.WS, Opt(items1), Lit("]")), nil
	}
	return Seq(Lit("["), c.WS, items1, Lit("]")), nil
}

// Property is one member an object grammar may hold.
type Property struct {
	Name     string
	Value    *Node
	Required bool
}

// ObjectProperties reads an object schema's members in order: its
// properties, then required names it does not describe (with the
// additionalProperties schema). free is set when the schema describes no
// member and allows others: any object of values from freeValue fits.
func (c *SchemaCompiler) ObjectProperties(s *Value, path string) (props []Property, free bool, freeValue *Node, err error) {
	ps := s.Get("properties")
	if ps != nil && ps.Kind != "object" {
		return nil, false, nil, schemaErr(path, "properties", "must be an object of schemas")
	}
	req := map[string]bool{}
	var reqOrder []string
	if r := s.Get("required"); r != nil {
		if r.Kind != "array" {
			return nil, false, nil, schemaErr(path, "required", "must be a list of property names")
		}
		for _, e := range r.Arr {
			if e.Kind != "string" {
				return nil, false, nil, schemaErr(path, "required", "must be a list of property names")
			}
			if !req[e.Str] {
				req[e.Str] = true
				reqOrder = append(reqOrder, e.Str)
			}
		}
	}
	addl := s.Get("additionalProperties")
	addlAllowed := addl == nil || addl.Kind != "boolean" || addl.Bool
	addlValue := func() (*Node, error) {
		if addl == nil || addl.Kind == "boolean" {
			return c.AnyValue(), nil
		}
		return c.schema(addl, path+"/additionalProperties")
	}
	if (ps == nil || len(ps.Keys) == 0) && len(req) == 0 && addlAllowed {
		v, err := addlValue()
		return nil, true, v, err
	}
	seen := map[string]bool{}
	if ps != nil {
		for _, k := range ps.Keys {
			n, err := c.schema(ps.Obj[k], path+"/properties/"+escapePointer(k))
			if err != nil {
				return nil, false, nil, err
			}
			props = append(props, Property{Name: k, Value: n, Required: req[k]})
			seen[k] = true
		}
	}
	for _, k := range reqOrder {
		if seen[k] {
			continue
		}
		if !addlAllowed {
			return nil, false, nil, schemaErr(path, "required", "%q is required but not among the properties, and additionalProperties is false", k)
		}
		n, err := addlValue()
		if err != nil {
			return nil, false, nil, err
		}
		props = append(props, Property{Name: k, Value: n, Required: true})
	}
	return props, false, nil, nil
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func (c *SchemaCompiler) object(s *Value, path string) (*Node, error) {
	minP, err := intKeyword(s, "minProperties", path, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	maxP, err := intKeyword(s, "maxProperties", path, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	props, free, freeValue, err := c.ObjectProperties(s, path)
	if err != nil {
		return nil, err
	}
	if free {
		if minP > 0 {
			return nil, schemaErr(path, "minProperties", "is not supported for an object without properties")
		}
		return c.freeObject(freeValue, 0, maxP), nil
	}
	nreq := 0
	for _, p := range props {
		if p.Required {
			nreq++
		}
	}
	if minP > nreq {
		return nil, schemaErr(path, "minProperties", "%d is more than the %d required properties; braid only enforces it through required", minP, nreq)
	}
	if maxP >= 0 && maxP < len(props) {
		if maxP < nreq {
			return nil, schemaErr(path, "maxProperties", "%d is fewer than the %d required properties", maxP, nreq)
		}
		return nil, schemaErr(path, "maxProperties", "%d is fewer than the %d properties described; braid cannot enforce it", maxP, len(props))
	}
	return c.Members("{", "}", Seq(c.WS, Lit(","), c.WS), props, func(p Property) *Node {
		return Seq(Lit(quoteJSON(p.Name)), c.WS, Lit(":"), c.WS, p.Value)
	}), nil
}

// Members is an object-like list: open, the properties in order (optional
// ones may be left out) written by member and separated by sep, close. It
// serves JSON objects and the tool-call formats that write arguments as
// tagged pairs.
func (c *SchemaCompiler) Members(open, close string, sep *Node, props []Property, member func(Property) *Node) *Node {
	n := len(props)
	// tail(i): the members from i on, each after a separator.
	tails := make([]*Node, n+1)
	tails[n] = Empty()
	for i := n - 1; i >= 0; i-- {
		item := Seq(sep, member(props[i]))
		name := c.b.Fresh(c.prefix + "members")
		var body *Node
		if props[i].Required {
			body = Seq(item, tails[i+1])
		} else {
			body = Seq(Opt(item), tails[i+1])
		}
		c.b.Define(name, body)
		tails[i] = c.b.Ref(name)
	}
	var firsts []*Node
	allOptional := true
	for j := 0; j < n; j++ {
		firsts = append(firsts, Seq(member(props[j]), tails[j+1]))
		if props[j].Required {
			allOptional = false
			break
		}
	}
	body := Seq(Alt(firsts...), c.WS)
	if n == 0 {
		return Seq(Lit(open), c.WS, Lit(close))
	}
	if allOptional {
		return Seq(Lit(open), c.WS, Opt(body), Lit(close))
	}
	return Seq(Lit(open), c.WS, body, Lit(close))
}
