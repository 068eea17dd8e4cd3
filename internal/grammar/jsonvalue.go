package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
)

// Value is a decoded JSON value that keeps object key order (a schema's
// properties are generated in the order written) and numbers as written.
// Kind is one of "null", "boolean", "number", "string", "array", "object".
type Value struct {
	Kind string
	Bool bool
	Num  json.Number
	Str  string
	Arr  []*Value
	Keys []string // object keys in order
	Obj  map[string]*Value
}

// maxJSONDepth bounds nesting when reading JSON (schemas and outputs).
const maxJSONDepth = 200

// ParseValue reads one JSON value; trailing data is an error. A duplicate
// object key keeps its last value (as JavaScript does) at its first place.
func ParseValue(data []byte) (*Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func readValue(dec *json.Decoder, depth int) (*Value, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("JSON nested deeper than %d", maxJSONDepth)
	}
	t, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, errors.New("unexpected end of JSON")
		}
		return nil, err
	}
	switch x := t.(type) {
	case nil:
		return &Value{Kind: "null"}, nil
	case bool:
		return &Value{Kind: "boolean", Bool: x}, nil
	case json.Number:
		return &Value{Kind: "number", Num: x}, nil
	case string:
		return &Value{Kind: "string", Str: x}, nil
	case json.Delim:
		switch x {
		case '[':
			v := &Value{Kind: "array", Arr: []*Value{}}
			for dec.More() {
				e, err := readValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.Arr = append(v.Arr, e)
			}
			_, err := dec.Token()
			return v, err
		case '{':
			v := &Value{Kind: "object", Obj: map[string]*Value{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				e, err := readValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if _, dup := v.Obj[k]; !dup {
					v.Keys = append(v.Keys, k)
				}
				v.Obj[k] = e
			}
			_, err := dec.Token()
			return v, err
		}
	}
	return nil, fmt.Errorf("unexpected JSON token %v", t)
}

// Get returns the member k of an object, or nil.
func (v *Value) Get(k string) *Value {
	if v == nil || v.Kind != "object" {
		return nil
	}
	return v.Obj[k]
}

// Encode writes v as compact JSON with object keys in order and no HTML
// escaping.
func (v *Value) Encode() string {
	var sb strings.Builder
	v.encode(&sb)
	return sb.String()
}

func (v *Value) encode(sb *strings.Builder) {
	switch v.Kind {
	case "null":
		sb.WriteString("null")
	case "boolean":
		if v.Bool {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case "number":
		sb.WriteString(v.Num.String())
	case "string":
		sb.WriteString(quoteJSON(v.Str))
	case "array":
		sb.WriteByte('[')
		for i, e := range v.Arr {
			if i > 0 {
				sb.WriteString(", ")
			}
			e.encode(sb)
		}
		sb.WriteByte(']')
	case "object":
		sb.WriteByte('{')
		for i, k := range v.Keys {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(quoteJSON(k))
			sb.WriteString(": ")
			v.Obj[k].encode(sb)
		}
		sb.WriteByte('}')
	}
}

// quoteJSON is s as a JSON string, without HTML escaping.
func quoteJSON(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// rat is the exact value of a JSON number.
func (v *Value) rat() (*big.Rat, bool) {
	r, ok := new(big.Rat).SetString(v.Num.String())
	return r, ok
}

// Equal is JSON equality: numbers by value, objects regardless of key
// order.
func (v *Value) Equal(w *Value) bool {
	if v.Kind != w.Kind {
		return false
	}
	switch v.Kind {
	case "null":
		return true
	case "boolean":
		return v.Bool == w.Bool
	case "number":
		a, ok1 := v.rat()
		b, ok2 := w.rat()
		return ok1 && ok2 && a.Cmp(b) == 0
	case "string":
		return v.Str == w.Str
	case "array":
		if len(v.Arr) != len(w.Arr) {
			return false
		}
		for i := range v.Arr {
			if !v.Arr[i].Equal(w.Arr[i]) {
				return false
			}
		}
		return true
	case "object":
		if len(v.Obj) != len(w.Obj) {
			return false
		}
		for k, x := range v.Obj {
			y, ok := w.Obj[k]
			if !ok || !x.Equal(y) {
				return false
			}
		}
		return true
	}
	return false
}
