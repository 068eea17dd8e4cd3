package server

import (
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"braid/internal/chat"
	"braid/internal/engine"
	"braid/internal/grammar"
)

// responseFormat is OpenAI's response_format: {"type": "text"},
// {"type": "json_object"} or {"type": "json_schema", "json_schema":
// {"name", "schema", "strict"}}. llama-server's {"type": "json_object",
// "schema": {...}} is accepted too.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	} `json:"json_schema"`
	Schema json.RawMessage `json:"schema"`
}

// constraintSpec is a request's output constraint before compilation: what
// kind, its source text, and the request field it came from (for errors).
type constraintSpec struct {
	kind  string // "json", "object", "schema", "gbnf"
	text  []byte
	param string
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// outputConstraint reads response_format, json_schema and grammar: at most
// one may constrain the output.
func (q *samplingRequest) outputConstraint() (*constraintSpec, *apiError) {
	var specs []*constraintSpec
	if rf := q.ResponseFormat; rf != nil {
		switch rf.Type {
		case "text", "":
			if rf.Type == "" {
				return nil, badRequest("response_format.type", "response_format.type is required: text, json_object or json_schema")
			}
		case "json_object":
			if isNull(rf.Schema) {
				specs = append(specs, &constraintSpec{kind: "object", param: "response_format"})
			} else {
				specs = append(specs, &constraintSpec{kind: "schema", text: rf.Schema, param: "response_format.schema"})
			}
		case "json_schema":
			if rf.JSONSchema == nil {
				return nil, badRequest("response_format.json_schema", "response_format of type json_schema needs a json_schema object with the schema")
			}
			if isNull(rf.JSONSchema.Schema) {
				return nil, badRequest("response_format.json_schema.schema", "response_format.json_schema.schema is required")
			}
			specs = append(specs, &constraintSpec{kind: "schema", text: rf.JSONSchema.Schema, param: "response_format.json_schema.schema"})
		default:
			return nil, badRequest("response_format.type", "response_format.type %q is not one of text, json_object, json_schema", rf.Type)
		}
	}
	if !isNull(q.JSONSchema) {
		specs = append(specs, &constraintSpec{kind: "schema", text: q.JSONSchema, param: "json_schema"})
	}
	if q.Grammar != nil && *q.Grammar != "" {
		specs = append(specs, &constraintSpec{kind: "gbnf", text: []byte(*q.Grammar), param: "grammar"})
	}
	switch len(specs) {
	case 0:
		return nil, nil
	case 1:
		return specs[0], nil
	}
	return nil, badRequest(specs[1].param, "%s and %s both constrain the output; send one", specs[0].param, specs[1].param)
}

// compile builds the grammar of a spec; errors are 400s naming the field
// and, for schemas, the keyword and where it is.
func (c *constraintSpec) compile() (*grammar.Grammar, *apiError) {
	var g *grammar.Grammar
	var err error
	switch c.kind {
	case "object":
		g = grammar.JSONGrammar(true)
	case "json":
		g = grammar.JSONGrammar(false)
	case "schema":
		g, err = grammar.CompileSchema(c.text)
	case "gbnf":
		g, err = grammar.ParseGBNF(string(c.text))
	}
	if err != nil {
		msg := err.Error()
		var se *grammar.SchemaError
		if errors.As(err, &se) {
			return nil, badRequest(c.param, "%s: %v (braid enforces schemas while sampling and refuses what it cannot enforce)", c.param, se)
		}
		return nil, badRequest(c.param, "%s: %s", c.param, strings.TrimPrefix(msg, "grammar: "))
	}
	return g, nil
}

// wrapReasoning lets a reasoning model think before the constrained
// answer: the grammar of the answer (rule "answer") follows the format's
// reasoning block, which may hold any text without '<'. For think tags the
// block is optional (required to close when the prompt opened it); for
// harmony it is an analysis message, then the final channel's header.
func wrapReasoning(b *grammar.Builder, format chat.ReasoningFormat, opened bool, answer *grammar.Node) *grammar.Node {
	text := grammar.Star(grammar.Class([]grammar.RuneRange{{Lo: '<', Hi: '<'}}, true))
	ws := grammar.Star(grammar.Class([]grammar.RuneRange{{Lo: ' ', Hi: ' '}, {Lo: '\t', Hi: '\n'}, {Lo: '\r', Hi: '\r'}}, false))
	switch format {
	case chat.ReasoningThink:
		block := grammar.Seq(grammar.Lit("<think>"), text, grammar.Lit("</think>"), ws)
		if opened {
			return grammar.Seq(text, grammar.Lit("</think>"), ws, answer)
		}
		return grammar.Seq(grammar.Opt(block), answer)
	case chat.ReasoningHarmony:
		analysis := grammar.Seq(grammar.Lit("<|channel|>analysis<|message|>"), text, grammar.Lit("<|end|><|start|>assistant"))
		return grammar.Seq(grammar.Opt(analysis), grammar.Lit("<|channel|>final<|message|>"), answer)
	}
	return answer
}

// guideCache keeps the guides of recent grammars: a client that sends the
// same schema again reuses its automaton and its masks.
type guideCache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[string]*list.Element
}

type guideEntry struct {
	key string
	gd  *grammar.Guide
}

func newGuideCache(max int) *guideCache {
	return &guideCache{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *guideCache) get(key string) *grammar.Guide {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*guideEntry).gd
	}
	return nil
}

func (c *guideCache) put(key string, gd *grammar.Guide) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return
	}
	c.items[key] = c.ll.PushFront(&guideEntry{key, gd})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*guideEntry).key)
	}
}

// vocabs are a backend's vocabularies for masking, built on first use: for
// chat replies (the format's control tags written out) and for text
// completions (control tokens write nothing).
type vocabs struct {
	chatOnce, textOnce sync.Once
	chat, text         *grammar.Vocab
	guides             *guideCache
}

func (b *Backend) vocab(chatReply bool) *grammar.Vocab {
	v := &b.vocabs
	if chatReply {
		v.chatOnce.Do(func() { v.chat = grammar.NewVocab(grammar.TokenPieces(b.Tok, b.render), b.Tok.EOGs()) })
		return v.chat
	}
	v.textOnce.Do(func() { v.text = grammar.NewVocab(grammar.TokenPieces(b.Tok, nil), b.Tok.EOGs()) })
	return v.text
}

// guide returns the cached guide for key, or builds one from the grammar
// that build returns and checks that it can start.
func (b *Backend) guide(key string, chatReply bool, param string, build func() (*grammar.Grammar, *apiError)) (*grammar.Guide, *apiError) {
	if chatReply {
		key = "chat\x00" + key
	} else {
		key = "text\x00" + key
	}
	if gd := b.vocabs.guides.get(key); gd != nil {
		return gd, nil
	}
	g, e := build()
	if e != nil {
		return nil, e
	}
	gd := grammar.NewGuide(g, b.vocab(chatReply))
	if err := gd.Prepare(); err != nil {
		return nil, badRequest(param, "%s: %s", param, strings.TrimPrefix(err.Error(), "grammar: "))
	}
	if !gd.HasFiniteSentence() {
		return nil, badRequest(param, "%s: the grammar has no finite sentence (every derivation goes on forever), so no reply could ever be complete", param)
	}
	b.vocabs.guides.put(key, gd)
	return gd, nil
}

// specGuide is the guide of a request's response_format, json_schema or
// grammar; for a chat reply of a reasoning model the answer may follow the
// model's reasoning.
func (b *Backend) specGuide(spec *constraintSpec, chatReply bool, format chat.ReasoningFormat, opened bool) (*grammar.Guide, *apiError) {
	key := fmt.Sprintf("%s\x00%d\x00%v\x00%s", spec.kind, format, opened, spec.text)
	return b.guide(key, chatReply, spec.param, func() (*grammar.Grammar, *apiError) {
		g, e := spec.compile()
		if e != nil || format == chat.ReasoningNone {
			return g, e
		}
		// Compile again inside a wrapper: the answer's grammar becomes
		// one rule of a grammar that starts with the reasoning.
		bl := grammar.NewBuilder()
		bl.Define("answer", bl.Embed(g))
		bl.Define("root", wrapReasoning(bl, format, opened, bl.Ref("answer")))
		wg, err := bl.Build("root")
		if err != nil {
			return nil, badRequest(spec.param, "%s: %v", spec.param, err)
		}
		return wg, nil
	})
}

// closingConstraint is what the server asks of a grammar constraint about
// its budget (grammar.Constraint): the shortest reply, and whether the
// reply was closed early to fit.
type closingConstraint interface {
	MinTokens() (int, bool)
	ClosureForced() bool
}

// checkClosureBudget refuses a constrained request whose budget cannot
// hold the shortest reply its grammar allows: cut short, the reply would
// not parse. asked is the request's max_tokens (negative when it set
// none); maxTok is the budget after the context's room.
func checkClosureBudget(c engine.Constraint, asked, maxTok int) *apiError {
	cc, ok := c.(closingConstraint)
	if !ok {
		return nil
	}
	min, ok := cc.MinTokens()
	if !ok || maxTok >= min {
		return nil
	}
	if asked >= 0 && asked <= maxTok {
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "max_tokens", Code: "max_tokens_below_structure",
			Message: fmt.Sprintf("max_tokens is %d but the shortest reply the requested format (schema, grammar or tool call) allows takes %d tokens; raise max_tokens to at least %d", asked, min, min)}
	}
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "max_tokens", Code: "context_length_exceeded",
		Message: fmt.Sprintf("the context leaves room for %d tokens after the prompt but the shortest reply the requested format (schema, grammar or tool call) allows takes %d tokens", maxTok, min)}
}

// closureForced reports whether c closed its reply early to fit the
// budget: the reply is complete but finish_reason stays "length".
func closureForced(c engine.Constraint) bool {
	cc, ok := c.(closingConstraint)
	return ok && cc.ClosureForced()
}

// braidInfo is braid's own part of a response ("braid": {...}), present
// only when it has something to say.
type braidInfo struct {
	// ClosureForced: the budget (max_tokens or the context) ran short
	// and the constrained reply was closed early to stay valid.
	ClosureForced bool `json:"closure_forced"`
}

// closureHeader names the response header (whole replies) and trailer
// (streams) that says the closure was forced.
const closureHeader = "X-Braid-Closure-Forced"
