package server

import (
	"strings"

	"braid/internal/tokenizer"
)

// textStream turns generated tokens into text to send, holding back any tail
// that could still become a stop string, so the stop text itself is never
// sent even when it spans several tokens.
type textStream struct {
	dec     *tokenizer.Decoder
	render  map[int32]bool // control tokens written out, not dropped
	stops   []string
	pending string // decoded, not yet sent
	stopped bool
}

func newTextStream(tok *tokenizer.Tokenizer, stops []string, render map[int32]bool) *textStream {
	return &textStream{dec: tok.NewDecoder(), render: render, stops: stops}
}

// add takes one token and returns the text that can be sent now; once a stop
// string has appeared it returns the text before it and reports true, and
// every later call returns nothing.
func (t *textStream) add(id int32) (string, bool) {
	if t.stopped {
		return "", true
	}
	t.dec.RenderSpecial = t.render[id]
	t.pending += t.dec.Add(id)
	return t.release(false)
}

// flush returns what is still held at the end of generation.
func (t *textStream) flush() (string, bool) {
	if t.stopped {
		return "", true
	}
	t.pending += t.dec.Flush()
	return t.release(true)
}

func (t *textStream) release(final bool) (string, bool) {
	if len(t.stops) == 0 {
		out := t.pending
		t.pending = ""
		return out, false
	}
	// The earliest stop string wins; text before it goes out.
	cut := -1
	for _, s := range t.stops {
		if i := strings.Index(t.pending, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		out := t.pending[:cut]
		t.pending, t.stopped = "", true
		return out, true
	}
	keep := 0
	if !final {
		for _, s := range t.stops {
			keep = max(keep, overlap(t.pending, s))
		}
	}
	out := t.pending[:len(t.pending)-keep]
	t.pending = t.pending[len(t.pending)-keep:]
	return out, false
}

// overlap is the length of the longest suffix of text that is a proper
// prefix of stop.
func overlap(text, stop string) int {
	for n := min(len(text), len(stop)-1); n > 0; n-- {
		if strings.HasSuffix(text, stop[:n]) {
			return n
		}
	}
	return 0
}
