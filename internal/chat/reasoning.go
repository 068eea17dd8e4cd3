package chat

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ReasoningFormat is how a model's output separates its reasoning from its
// answer. Models learn it from their chat template, so the template tells
// which one applies (DetectReasoning).
type ReasoningFormat int

const (
	// ReasoningNone: the whole output is the answer.
	ReasoningNone ReasoningFormat = iota
	// ReasoningThink: reasoning between <think> and </think>, then the
	// answer (Qwen3, GLM, DeepSeek-R1). Many templates write the opening
	// tag into the prompt, so the output starts inside the reasoning.
	ReasoningThink
	// ReasoningHarmony: OpenAI's harmony messages (gpt-oss), each
	// "<|channel|>NAME<|message|>TEXT<|end|>", later ones after
	// "<|start|>assistant". Channel analysis is reasoning, final is the
	// answer, and a message with a recipient ("to=functions.f") is a tool
	// call.
	ReasoningHarmony
)

func (f ReasoningFormat) String() string {
	switch f {
	case ReasoningNone:
		return "none"
	case ReasoningThink:
		return "think tags"
	case ReasoningHarmony:
		return "harmony"
	}
	return fmt.Sprintf("ReasoningFormat(%d)", int(f))
}

// DetectReasoning picks the format a template's model writes. Harmony is
// tested first: a harmony template has no use for <think>, while a think
// template never writes <|channel|>.
func DetectReasoning(templateSource string) ReasoningFormat {
	switch {
	case strings.Contains(templateSource, harmonyChannel):
		return ReasoningHarmony
	case strings.Contains(templateSource, thinkOpen):
		return ReasoningThink
	}
	return ReasoningNone
}

// Tags are the special tokens the format's parser reads. A detokenizer that
// drops control tokens must still write these, or the parser never sees
// where the reasoning ends.
func (f ReasoningFormat) Tags() []string {
	switch f {
	case ReasoningThink:
		return []string{thinkOpen, thinkClose}
	case ReasoningHarmony:
		return []string{harmonyStart, harmonyChannel, harmonyMessage, harmonyConstrain, harmonyEnd, harmonyReturn, harmonyCall}
	}
	return nil
}

// Vocabulary is the part of a tokenizer that ControlTags needs.
type Vocabulary interface {
	TokenID(text string) (int32, bool)
	IsControl(id int32) bool
}

// ControlTags are the ids of f's tags that are control tokens in vocab:
// those a detokenizer drops unless told to write them out.
func (f ReasoningFormat) ControlTags(vocab Vocabulary) map[int32]bool {
	ids := map[int32]bool{}
	for _, tag := range f.Tags() {
		if id, ok := vocab.TokenID(tag); ok && vocab.IsControl(id) {
			ids[id] = true
		}
	}
	return ids
}

// ReasoningEfforts are the values of the reasoning_effort template variable
// that reasoning templates (gpt-oss's) know.
var ReasoningEfforts = []string{"low", "medium", "high"}

// CheckReasoningEffort reports whether effort is one of ReasoningEfforts.
func CheckReasoningEffort(effort string) error {
	for _, e := range ReasoningEfforts {
		if effort == e {
			return nil
		}
	}
	return fmt.Errorf("reasoning_effort %q is not one of %s", effort, strings.Join(ReasoningEfforts, ", "))
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"

	harmonyStart     = "<|start|>"
	harmonyChannel   = "<|channel|>"
	harmonyMessage   = "<|message|>"
	harmonyConstrain = "<|constrain|>"
	harmonyEnd       = "<|end|>"
	harmonyReturn    = "<|return|>"
	harmonyCall      = "<|call|>"

	// maxHeader bounds a harmony message header (role, recipient, channel,
	// content type: well under 200 bytes in practice). Without <|message|>
	// within it the text is not a header and is passed on as content, so
	// a model that misuses the tags cannot hold back its output forever.
	maxHeader = 512

	spaces = " \t\r\n"
)

var (
	thinkCloseTags = []string{thinkClose}
	// A harmony body ends at an end tag, or at a tag that starts the next
	// header when a model leaves out <|end|>.
	harmonyBodyTags = []string{harmonyEnd, harmonyReturn, harmonyCall, harmonyStart, harmonyChannel}
	// The first header continues the prompt's "<|start|>assistant": it
	// starts with a tag, or with the recipient when the model calls a tool.
	harmonyFirstHeader = []string{"<|", "to=", " to="}
)

// Split is text divided into reasoning and answer.
type Split struct {
	Reasoning string
	Content   string
}

// segKind is where a piece of model output goes.
type segKind int

const (
	segReasoning segKind = iota
	segContent
	// segMarkup is format syntax that neither side shows: tags, harmony
	// headers, and the whitespace around think tags.
	segMarkup
)

type parseState int

const (
	stBegin      parseState = iota // think: before the first text, a <think> may come
	stThinking                     // think: inside the reasoning
	stAfterThink                   // think: after </think>, before the answer's first text
	stContent                      // think: the answer
	stHeader                       // harmony: reading a header, up to <|message|>
	stBody                         // harmony: a message body, or text between messages
)

// ReasoningParser splits a model's output into reasoning and answer while
// it streams. Text arrives in arbitrary pieces (a tag may be split over
// several tokens); the parser holds back only what could still turn out to
// be a tag (and, in think format, whitespace that may precede </think>), and
// the same text gives the same Split however it is cut. Every input byte
// ends up in the reasoning, the content, or the dropped markup. It is not
// safe for concurrent use.
type ReasoningParser struct {
	format ReasoningFormat
	state  parseState
	buf    string // received, not yet classified

	opened bool // think: the prompt ended with <think>
	fresh  bool // think: at the start of the reasoning, whose leading whitespace is dropped

	first bool    // harmony: the header being read continues the prompt
	kind  segKind // harmony: where the current body goes
	tool  bool    // harmony: the current message is a tool call, kept whole in the content

	out   [2]strings.Builder // reasoning, content of the current call
	trace func(segKind, string)
}

// NewReasoningParser returns a parser for f. prompt is the rendered prompt
// the output continues: a think prompt that ends with <think> means the
// output starts inside the reasoning. With ReasoningNone everything is
// content.
func NewReasoningParser(f ReasoningFormat, prompt string) *ReasoningParser {
	p := &ReasoningParser{format: f}
	switch f {
	case ReasoningThink:
		p.state = stBegin
		p.opened = strings.HasSuffix(strings.TrimRight(prompt, spaces), thinkOpen)
	case ReasoningHarmony:
		p.state, p.first = stHeader, true
	default:
		p.state = stContent
	}
	return p
}

// Add takes the next piece of output and returns what is now known to be
// reasoning and content.
func (p *ReasoningParser) Add(text string) Split {
	p.buf += text
	p.run(false)
	return p.take()
}

// Flush classifies whatever is still held at the end of the output.
func (p *ReasoningParser) Flush() Split {
	p.run(true)
	return p.take()
}

func (p *ReasoningParser) take() Split {
	s := Split{Reasoning: p.out[segReasoning].String(), Content: p.out[segContent].String()}
	p.out[0].Reset()
	p.out[1].Reset()
	return s
}

func (p *ReasoningParser) emit(k segKind, s string) {
	if s == "" {
		return
	}
	if p.trace != nil {
		p.trace(k, s)
	}
	if k != segMarkup {
		p.out[k].WriteString(s)
	}
}

// consume emits the first n bytes of the buffer as k.
func (p *ReasoningParser) consume(k segKind, n int) {
	p.emit(k, p.buf[:n])
	p.buf = p.buf[n:]
}

func (p *ReasoningParser) run(final bool) {
	for p.step(final) {
	}
}

// step makes progress on the buffer and reports whether to call it again;
// it returns false when the rest must wait for more text (or all is done).
func (p *ReasoningParser) step(final bool) bool {
	switch p.state {
	case stContent:
		p.consume(segContent, len(p.buf))
		return false

	case stBegin:
		p.consume(segMarkup, len(p.buf)-len(strings.TrimLeft(p.buf, spaces)))
		switch {
		case p.buf == "":
			return false
		case strings.HasPrefix(p.buf, thinkOpen):
			p.consume(segMarkup, len(thinkOpen))
			p.state, p.fresh = stThinking, true
		case !final && strings.HasPrefix(thinkOpen, p.buf):
			return false
		case p.opened:
			p.state, p.fresh = stThinking, true
		default:
			p.state = stContent
		}
		return true

	case stThinking:
		if p.fresh {
			p.consume(segMarkup, len(p.buf)-len(strings.TrimLeft(p.buf, spaces)))
			if p.buf == "" {
				return false
			}
			p.fresh = false
		}
		if i := strings.Index(p.buf, thinkClose); i >= 0 {
			p.consume(segReasoning, len(strings.TrimRight(p.buf[:i], spaces)))
			p.consume(segMarkup, strings.Index(p.buf, thinkClose)+len(thinkClose))
			p.state = stAfterThink
			return true
		}
		// Trailing whitespace waits: it belongs to the reasoning only if
		// more reasoning follows, not if </think> does.
		hold := 0
		if !final {
			hold = partialTag(p.buf, thinkCloseTags)
		}
		p.consume(segReasoning, len(strings.TrimRight(p.buf[:len(p.buf)-hold], spaces)))
		if final {
			p.consume(segMarkup, len(p.buf))
		}
		return false

	case stAfterThink:
		p.consume(segMarkup, len(p.buf)-len(strings.TrimLeft(p.buf, spaces)))
		if p.buf == "" {
			return false
		}
		p.state = stContent
		return true

	case stHeader:
		return p.header(final)

	case stBody:
		at, tag := firstTag(p.buf, harmonyBodyTags)
		if at < 0 {
			hold := 0
			if !final {
				hold = partialTag(p.buf, harmonyBodyTags)
			}
			p.consume(p.kind, len(p.buf)-hold)
			return false
		}
		p.consume(p.kind, at)
		if tag == harmonyStart || tag == harmonyChannel {
			p.state = stHeader
			return true
		}
		k := segMarkup
		if p.tool {
			k = segContent
		}
		p.consume(k, len(tag))
		// Text after a message's end and before the next header is
		// nobody's channel; showing it loses nothing.
		p.kind, p.tool = segContent, false
		return true
	}
	panic(fmt.Sprintf("chat: reasoning parser in state %d", p.state))
}

// header reads a harmony header up to <|message|> and decides where the
// body goes.
func (p *ReasoningParser) header(final bool) bool {
	if p.first {
		// Plain text from a model that does not write harmony is content,
		// and passes at once rather than waiting for a <|message|>.
		switch headerStart(p.buf) {
		case 0:
			if !final {
				return false
			}
			fallthrough
		case -1:
			p.first = false
			p.state, p.kind = stBody, segContent
			return true
		}
	}
	i := strings.Index(p.buf, harmonyMessage)
	switch {
	case i >= 0 && i <= maxHeader:
		p.first = false
		h := p.buf[:i]
		channel, recipient := parseHeader(h)
		n := i + len(harmonyMessage)
		switch {
		case recipient:
			// A tool call: parsing it is not this parser's job, and its
			// text must reach the client, so it stays whole, tags
			// included, in the content.
			p.consume(segContent, n)
			p.kind, p.tool = segContent, true
		case channel == "analysis":
			p.consume(segMarkup, n)
			p.kind, p.tool = segReasoning, false
		default:
			// final, and commentary without a recipient (preambles the
			// user is meant to see).
			p.consume(segMarkup, n)
			p.kind, p.tool = segContent, false
		}
		p.state = stBody
		return true
	case i < 0 && len(p.buf) < maxHeader+len(harmonyMessage):
		// <|message|> may still come within maxHeader.
		if !final {
			return false
		}
		// The output ended inside a header (a token limit): a recipient
		// means a tool call, kept; anything else is only markup.
		k := segMarkup
		if _, recipient := parseHeader(p.buf); recipient {
			k = segContent
		}
		p.consume(k, len(p.buf))
		return false
	}
	// Too long for a header: the tags are not being used as harmony.
	cut := maxHeader
	for cut > 1 && !utf8.RuneStart(p.buf[cut]) {
		cut--
	}
	p.first = false
	p.consume(segContent, cut)
	p.state, p.kind, p.tool = stBody, segContent, false
	return true
}

// headerStart says whether text can start the first harmony header: 1 yes,
// -1 no, 0 not known yet (text is a prefix of a possible start).
func headerStart(text string) int {
	undecided := false
	for _, s := range harmonyFirstHeader {
		if strings.HasPrefix(text, s) {
			return 1
		}
		if strings.HasPrefix(s, text) {
			undecided = true
		}
	}
	if undecided {
		return 0
	}
	return -1
}

// parseHeader reads a header such as "<|start|>assistant<|channel|>final" or
// " to=functions.f<|channel|>commentary json": the channel's name and
// whether the message has a recipient.
func parseHeader(h string) (channel string, recipient bool) {
	recipient = strings.Contains(h, "to=")
	if i := strings.LastIndex(h, harmonyChannel); i >= 0 {
		c := strings.TrimLeft(h[i+len(harmonyChannel):], spaces)
		if j := strings.IndexAny(c, " \t\r\n<"); j >= 0 {
			c = c[:j]
		}
		channel = c
	}
	return channel, recipient
}

// firstTag finds the earliest of tags in s: its offset and which, or -1.
func firstTag(s string, tags []string) (int, string) {
	at, tag := -1, ""
	for _, t := range tags {
		if i := strings.Index(s, t); i >= 0 && (at < 0 || i < at) {
			at, tag = i, t
		}
	}
	return at, tag
}

// partialTag is the length of the longest suffix of s that is a proper
// prefix of one of tags: text that the next piece may complete into a tag.
func partialTag(s string, tags []string) int {
	n := 0
	for _, t := range tags {
		for k := min(len(s), len(t)-1); k > n; k-- {
			if strings.HasSuffix(s, t[:k]) {
				n = k
				break
			}
		}
	}
	return n
}
