package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// decodeJSON turns JSON text into a template value the way Python's
// json.loads would: objects keep the key order of the text (templates iterate
// tool schemas and tojson must reproduce them as written), integers stay
// integers and anything with a fraction or exponent becomes a float.
// encoding/json's map[string]any would lose both distinctions.
func decodeJSON(data []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSONValue(dec)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("json: trailing data after value")
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(t), nil
	case string:
		return jinja.NewString(t), nil
	case json.Number:
		return numberValue(string(t)), nil
	case json.Delim:
		switch t {
		case '[':
			items := []jinja.Value{}
			for dec.More() {
				v, err := decodeJSONValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Undefined(), err
			}
			return jinja.NewList(items), nil
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				key, ok := kt.(string)
				if !ok {
					return jinja.Undefined(), fmt.Errorf("json: object key %v is not a string", kt)
				}
				v, err := decodeJSONValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				// Python keeps the last duplicate but at the first position;
				// Dict.Set does the same.
				d.AsDict().Set(key, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Undefined(), err
			}
			return d, nil
		}
	}
	return jinja.Undefined(), fmt.Errorf("json: unexpected token %v", tok)
}

// numberValue follows Python's json module: a literal without '.', 'e' or
// 'E' is an int; ints beyond int64 fall back to float rather than failing,
// since templates only print or compare them.
func numberValue(s string) jinja.Value {
	if !strings.ContainsAny(s, ".eE") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return jinja.NewInt(n)
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return jinja.NewString(s)
	}
	return jinja.NewFloat(f)
}

// toValue converts a Go value into a template value. Unlike
// jinja.FromGoValue it understands json.RawMessage (decoded with key order
// kept), json.Number, typed slices and maps, this package's Message and
// ToolCall, and structs via their JSON encoding, so callers can pass request
// data as they hold it.
func toValue(x any) (jinja.Value, error) {
	switch v := x.(type) {
	case nil:
		return jinja.None(), nil
	case jinja.Value:
		return v, nil
	case bool:
		return jinja.NewBool(v), nil
	case string:
		return jinja.NewString(v), nil
	case int:
		return jinja.NewInt(int64(v)), nil
	case int8:
		return jinja.NewInt(int64(v)), nil
	case int16:
		return jinja.NewInt(int64(v)), nil
	case int32:
		return jinja.NewInt(int64(v)), nil
	case int64:
		return jinja.NewInt(v), nil
	case uint:
		return uintValue(uint64(v)), nil
	case uint8:
		return jinja.NewInt(int64(v)), nil
	case uint16:
		return jinja.NewInt(int64(v)), nil
	case uint32:
		return jinja.NewInt(int64(v)), nil
	case uint64:
		return uintValue(v), nil
	case float32:
		return jinja.NewFloat(float64(v)), nil
	case float64:
		return jinja.NewFloat(v), nil
	case json.Number:
		return numberValue(string(v)), nil
	case json.RawMessage:
		if len(v) == 0 {
			return jinja.None(), nil
		}
		return decodeJSON(v)
	case Message:
		return v.value()
	case *Message:
		if v == nil {
			return jinja.None(), nil
		}
		return v.value()
	case ToolCall:
		return v.value()
	case []Message:
		items := make([]jinja.Value, len(v))
		for i := range v {
			mv, err := v[i].value()
			if err != nil {
				return jinja.Undefined(), err
			}
			items[i] = mv
		}
		return jinja.NewList(items), nil
	case []any:
		items := make([]jinja.Value, len(v))
		for i, e := range v {
			ev, err := toValue(e)
			if err != nil {
				return jinja.Undefined(), err
			}
			items[i] = ev
		}
		return jinja.NewList(items), nil
	case map[string]any:
		// A Go map has no order; sorted keys at least make renders
		// reproducible. Callers that care pass json.RawMessage.
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := jinja.NewDict()
		for _, k := range keys {
			ev, err := toValue(v[k])
			if err != nil {
				return jinja.Undefined(), err
			}
			d.AsDict().Set(k, ev)
		}
		return d, nil
	}
	return reflectValue(x)
}

func uintValue(u uint64) jinja.Value {
	if u > math.MaxInt64 {
		return jinja.NewFloat(float64(u))
	}
	return jinja.NewInt(int64(u))
}

// reflectValue handles the shapes the type switch does not name: typed
// slices and string-keyed maps element by element, everything else (structs,
// json.Marshaler) through its JSON encoding, which is what a template author
// would expect to see.
func reflectValue(x any) (jinja.Value, error) {
	rv := reflect.ValueOf(x)
	if _, ok := x.(json.Marshaler); !ok {
		switch rv.Kind() {
		case reflect.Pointer, reflect.Interface:
			if rv.IsNil() {
				return jinja.None(), nil
			}
			return toValue(rv.Elem().Interface())
		case reflect.Slice, reflect.Array:
			if rv.Kind() == reflect.Slice && rv.IsNil() {
				return jinja.None(), nil
			}
			if rv.Type().Elem().Kind() == reflect.Uint8 {
				break // []byte encodes as base64 in JSON; keep that.
			}
			items := make([]jinja.Value, rv.Len())
			for i := range items {
				ev, err := toValue(rv.Index(i).Interface())
				if err != nil {
					return jinja.Undefined(), err
				}
				items[i] = ev
			}
			return jinja.NewList(items), nil
		case reflect.Map:
			if rv.Type().Key().Kind() != reflect.String {
				break
			}
			if rv.IsNil() {
				return jinja.None(), nil
			}
			m := make(map[string]any, rv.Len())
			it := rv.MapRange()
			for it.Next() {
				m[it.Key().String()] = it.Value().Interface()
			}
			return toValue(m)
		}
	}
	data, err := json.Marshal(x)
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("chat: cannot use %T in a template: %w", x, err)
	}
	return decodeJSON(data)
}
