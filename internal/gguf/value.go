package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is the type tag of a metadata value, numbered as in GGUF files.
type ValueType uint32

// The GGUF metadata value types. The numbering is part of the format.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12

	// TypeInvalid is what the zero Value and failed lookups report, so that a
	// missing value can never be mistaken for a uint8.
	TypeInvalid ValueType = math.MaxUint32
)

var typeNames = [...]string{
	TypeUint8: "uint8", TypeInt8: "int8", TypeUint16: "uint16", TypeInt16: "int16",
	TypeUint32: "uint32", TypeInt32: "int32", TypeFloat32: "float32", TypeBool: "bool",
	TypeString: "string", TypeArray: "array", TypeUint64: "uint64", TypeInt64: "int64",
	TypeFloat64: "float64",
}

// String returns the lower-case name used by the GGUF spec, or "type(N)".
func (t ValueType) String() string {
	if t.valid() {
		return typeNames[t]
	}
	if t == TypeInvalid {
		return "invalid"
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

func (t ValueType) valid() bool { return t <= TypeFloat64 }

// size is the encoded size of a fixed-size type; 0 for strings and arrays,
// whose size depends on their contents.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one encoded value of type t can take; it bounds
// element counts by the bytes left before anything is allocated.
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return t.size()
}

func (t ValueType) isInt() bool {
	switch t {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64:
		return true
	}
	return false
}

func (t ValueType) isSigned() bool {
	return t == TypeInt8 || t == TypeInt16 || t == TypeInt32 || t == TypeInt64
}

// Value is one metadata value. The zero Value is invalid (Type reports
// TypeInvalid). Values are immutable and do not refer to the file they were
// read from, so they stay usable after the model is closed.
type Value struct {
	// k is the ValueType plus one, so that the zero Value is invalid rather
	// than a uint8 zero.
	k uint8
	// n holds fixed-size scalars: unsigned integers zero-extended, signed
	// ones sign-extended, floats as their IEEE bits, bools as the stored byte.
	n uint64
	s string
	a *array
}

// array keeps numeric elements in their little-endian encoding: token score
// and type arrays run to hundreds of thousands of entries, and one byte
// slice is far cheaper to read and hold than as many Values.
type array struct {
	elem ValueType
	n    int
	raw  []byte   // fixed-size elements
	strs []string // string elements
	vals []Value  // nested arrays
	err  error    // why a constructor made an invalid value
}

// Type returns the value's type, TypeInvalid for the zero Value.
func (v Value) Type() ValueType {
	if v.k == 0 {
		return TypeInvalid
	}
	return ValueType(v.k - 1)
}

// IsValid reports whether v holds a value (the zero Value and missing keys do not).
func (v Value) IsValid() bool { return v.k != 0 }

// kind encodes a valid type for Value.k.
func kind(t ValueType) uint8 { return uint8(t) + 1 }

// scalar builds a fixed-size value from its bits.
func scalar(t ValueType, n uint64) Value { return Value{k: kind(t), n: n} }

// Uint8 returns a uint8 metadata value.
func Uint8(x uint8) Value { return scalar(TypeUint8, uint64(x)) }

// Int8 returns an int8 metadata value.
func Int8(x int8) Value { return scalar(TypeInt8, uint64(int64(x))) }

// Uint16 returns a uint16 metadata value.
func Uint16(x uint16) Value { return scalar(TypeUint16, uint64(x)) }

// Int16 returns an int16 metadata value.
func Int16(x int16) Value { return scalar(TypeInt16, uint64(int64(x))) }

// Uint32 returns a uint32 metadata value.
func Uint32(x uint32) Value { return scalar(TypeUint32, uint64(x)) }

// Int32 returns an int32 metadata value.
func Int32(x int32) Value { return scalar(TypeInt32, uint64(int64(x))) }

// Uint64 returns a uint64 metadata value.
func Uint64(x uint64) Value { return scalar(TypeUint64, x) }

// Int64 returns an int64 metadata value.
func Int64(x int64) Value { return scalar(TypeInt64, uint64(x)) }

// Float32 returns a float32 metadata value.
func Float32(x float32) Value { return scalar(TypeFloat32, uint64(math.Float32bits(x))) }

// Float64 returns a float64 metadata value.
func Float64(x float64) Value { return scalar(TypeFloat64, math.Float64bits(x)) }

// Bool returns a bool metadata value.
func Bool(x bool) Value {
	if x {
		return scalar(TypeBool, 1)
	}
	return scalar(TypeBool, 0)
}

// String returns a string metadata value.
func String(s string) Value { return Value{k: kind(TypeString), s: s} }

// StringArray returns an array of strings; the slice is copied.
func StringArray(s []string) Value {
	return Value{k: kind(TypeArray), a: &array{elem: TypeString, n: len(s), strs: append([]string(nil), s...)}}
}

// numArray encodes fixed-size elements the way they are stored in a file.
func numArray[T any](elem ValueType, xs []T, put func([]byte, T)) Value {
	sz := elem.size()
	raw := make([]byte, len(xs)*sz)
	for i, x := range xs {
		put(raw[i*sz:], x)
	}
	if len(raw) == 0 {
		raw = nil
	}
	return Value{k: kind(TypeArray), a: &array{elem: elem, n: len(xs), raw: raw}}
}

var le = binary.LittleEndian

// Uint8Array returns an array of uint8.
func Uint8Array(xs []uint8) Value {
	return numArray(TypeUint8, xs, func(b []byte, x uint8) { b[0] = x })
}

// Int32Array returns an array of int32.
func Int32Array(xs []int32) Value {
	return numArray(TypeInt32, xs, func(b []byte, x int32) { le.PutUint32(b, uint32(x)) })
}

// Uint32Array returns an array of uint32.
func Uint32Array(xs []uint32) Value {
	return numArray(TypeUint32, xs, func(b []byte, x uint32) { le.PutUint32(b, x) })
}

// Int64Array returns an array of int64.
func Int64Array(xs []int64) Value {
	return numArray(TypeInt64, xs, func(b []byte, x int64) { le.PutUint64(b, uint64(x)) })
}

// Uint64Array returns an array of uint64.
func Uint64Array(xs []uint64) Value {
	return numArray(TypeUint64, xs, func(b []byte, x uint64) { le.PutUint64(b, x) })
}

// Float32Array returns an array of float32.
func Float32Array(xs []float32) Value {
	return numArray(TypeFloat32, xs, func(b []byte, x float32) { le.PutUint32(b, math.Float32bits(x)) })
}

// Float64Array returns an array of float64.
func Float64Array(xs []float64) Value {
	return numArray(TypeFloat64, xs, func(b []byte, x float64) { le.PutUint64(b, math.Float64bits(x)) })
}

// BoolArray returns an array of bool.
func BoolArray(xs []bool) Value {
	return numArray(TypeBool, xs, func(b []byte, x bool) {
		if x {
			b[0] = 1
		}
	})
}

// Array returns an array whose elements all have type elem; it is the way to
// build nested arrays and arrays of the less common integer types. When an
// element has another type the result is invalid, and a Writer given it
// reports why.
func Array(elem ValueType, vs []Value) Value {
	bad := func(format string, args ...any) Value {
		return Value{a: &array{err: fmt.Errorf(format, args...)}}
	}
	if !elem.valid() {
		return bad("Array: element type %v is not a GGUF value type", elem)
	}
	for i, x := range vs {
		if x.Type() != elem {
			if x.a != nil && x.a.err != nil {
				return bad("Array: element %d: %v", i, x.a.err)
			}
			return bad("Array: element %d is %v, want %v", i, x.Type(), elem)
		}
	}
	a := &array{elem: elem, n: len(vs)}
	switch elem {
	case TypeString:
		a.strs = make([]string, len(vs))
		for i, x := range vs {
			a.strs[i] = x.s
		}
	case TypeArray:
		a.vals = append([]Value(nil), vs...)
	default:
		sz := elem.size()
		if len(vs) > 0 {
			a.raw = make([]byte, len(vs)*sz)
		}
		for i, x := range vs {
			putScalar(a.raw[i*sz:], elem, x.n)
		}
	}
	return Value{k: kind(TypeArray), a: a}
}

// putScalar stores the bits of a fixed-size value in its on-disk width.
func putScalar(b []byte, t ValueType, n uint64) {
	switch t.size() {
	case 1:
		b[0] = byte(n)
	case 2:
		le.PutUint16(b, uint16(n))
	case 4:
		le.PutUint32(b, uint32(n))
	case 8:
		le.PutUint64(b, n)
	}
}

// getScalar reads the bits of a fixed-size value, extending signed integers
// so that Value.n keeps its invariant.
func getScalar(b []byte, t ValueType) uint64 {
	switch t {
	case TypeUint8, TypeBool:
		return uint64(b[0])
	case TypeInt8:
		return uint64(int64(int8(b[0])))
	case TypeUint16:
		return uint64(le.Uint16(b))
	case TypeInt16:
		return uint64(int64(int16(le.Uint16(b))))
	case TypeUint32, TypeFloat32:
		return uint64(le.Uint32(b))
	case TypeInt32:
		return uint64(int64(int32(le.Uint32(b))))
	case TypeUint64, TypeInt64, TypeFloat64:
		return le.Uint64(b)
	}
	return 0
}

// Int returns an integer value of any width as int64; false when v is not an
// integer or does not fit (a uint64 above MaxInt64). Bools are not integers.
func (v Value) Int() (int64, bool) {
	if !v.Type().isInt() {
		return 0, false
	}
	if v.Type() == TypeUint64 && v.n > math.MaxInt64 {
		return 0, false
	}
	return int64(v.n), true
}

// Uint returns an integer value of any width as uint64; false when v is not
// an integer or is negative.
func (v Value) Uint() (uint64, bool) {
	if !v.Type().isInt() {
		return 0, false
	}
	if v.Type().isSigned() && int64(v.n) < 0 {
		return 0, false
	}
	return v.n, true
}

// Float returns a float or integer value as float64 (large 64-bit integers
// round); false for other types.
func (v Value) Float() (float64, bool) {
	switch {
	case v.Type() == TypeFloat32:
		return float64(math.Float32frombits(uint32(v.n))), true
	case v.Type() == TypeFloat64:
		return math.Float64frombits(v.n), true
	case v.Type().isSigned():
		return float64(int64(v.n)), true
	case v.Type().isInt():
		return float64(v.n), true
	}
	return 0, false
}

// Bool returns a bool value; any nonzero stored byte is true, as in ggml.
func (v Value) Bool() (bool, bool) {
	if v.Type() != TypeBool {
		return false, false
	}
	return v.n != 0, true
}

// Str returns a string value; false for any other type.
func (v Value) Str() (string, bool) {
	if v.Type() != TypeString {
		return "", false
	}
	return v.s, true
}

// Len returns the number of elements of an array, 0 for other values.
func (v Value) Len() int {
	if v.Type() != TypeArray {
		return 0
	}
	return v.a.n
}

// ElemType returns the element type of an array, TypeInvalid for other values.
func (v Value) ElemType() ValueType {
	if v.Type() != TypeArray {
		return TypeInvalid
	}
	return v.a.elem
}

// Index returns element i of an array; the zero Value when v is not an array
// or i is out of range.
func (v Value) Index(i int) Value {
	if v.Type() != TypeArray || i < 0 || i >= v.a.n {
		return Value{}
	}
	switch a := v.a; a.elem {
	case TypeString:
		return String(a.strs[i])
	case TypeArray:
		return a.vals[i]
	default:
		sz := a.elem.size()
		return scalar(a.elem, getScalar(a.raw[i*sz:], a.elem))
	}
}

// Strings returns an array of strings. The slice is shared: do not modify it.
func (v Value) Strings() ([]string, bool) {
	if v.Type() != TypeArray || v.a.elem != TypeString {
		return nil, false
	}
	return v.a.strs, true
}

// Int32s returns an array of integers as int32; false when v is not an
// integer array or an element does not fit in int32.
func (v Value) Int32s() ([]int32, bool) {
	if v.Type() != TypeArray || !v.a.elem.isInt() {
		return nil, false
	}
	out := make([]int32, v.a.n)
	for i := range out {
		x, ok := v.Index(i).Int()
		if !ok || x < math.MinInt32 || x > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

// Float32s returns an array of numbers as float32. Integers are accepted
// only where float32 holds them exactly; float64 elements are rounded, since
// writers store scores as either width and the rounding is what ggml does too.
func (v Value) Float32s() ([]float32, bool) {
	if v.Type() != TypeArray {
		return nil, false
	}
	a := v.a
	out := make([]float32, a.n)
	switch {
	case a.elem == TypeFloat32:
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(a.raw[4*i:]))
		}
	case a.elem == TypeFloat64:
		for i := range out {
			out[i] = float32(math.Float64frombits(le.Uint64(a.raw[8*i:])))
		}
	case a.elem.isInt():
		for i := range out {
			x := v.Index(i)
			f, _ := x.Float()
			// Below 2^53 the float64 is the integer itself, so comparing it
			// with its float32 rounding tells whether float32 is exact.
			if math.Abs(f) >= 1<<53 || float64(float32(f)) != f {
				return nil, false
			}
			out[i] = float32(f)
		}
	default:
		return nil, false
	}
	return out, true
}

// Equal reports whether v and w have the same type and the same encoded
// contents (floats compare by bits, so NaN equals itself).
func (v Value) Equal(w Value) bool {
	if v.Type() != w.Type() {
		return false
	}
	switch v.Type() {
	case TypeString:
		return v.s == w.s
	case TypeArray:
		a, b := v.a, w.a
		if a.elem != b.elem || a.n != b.n {
			return false
		}
		switch a.elem {
		case TypeString:
			for i := range a.strs {
				if a.strs[i] != b.strs[i] {
					return false
				}
			}
			return true
		case TypeArray:
			for i := range a.vals {
				if !a.vals[i].Equal(b.vals[i]) {
					return false
				}
			}
			return true
		default:
			return string(a.raw) == string(b.raw)
		}
	case TypeInvalid:
		return true
	}
	return v.n == w.n
}

// Limits on what String prints, so that inspecting a 150k-token vocabulary
// or a 5 KB chat template stays one readable line.
const (
	showElems = 3
	showShort = 8
	showBytes = 200
	showElem  = 40
)

// String formats v for people: strings quoted (long ones cut, with their
// length), arrays of more than a few elements summarised as
// `[151936 strings: "!", "\"", "#", ... ]`.
func (v Value) String() string {
	return v.format(showBytes)
}

func (v Value) format(maxStr int) string {
	switch v.Type() {
	case TypeString:
		return quoteCut(v.s, maxStr)
	case TypeArray:
		var b strings.Builder
		n := v.a.n
		shown := n
		if n > showShort {
			shown = showElems
			fmt.Fprintf(&b, "[%d %ss: ", n, v.a.elem)
		} else {
			b.WriteString("[")
		}
		for i := range shown {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(v.Index(i).format(showElem))
		}
		if shown < n {
			b.WriteString(", ... ")
		}
		b.WriteString("]")
		return b.String()
	case TypeBool:
		return strconv.FormatBool(v.n != 0)
	case TypeFloat32:
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(v.n))), 'g', -1, 32)
	case TypeFloat64:
		return strconv.FormatFloat(math.Float64frombits(v.n), 'g', -1, 64)
	case TypeInvalid:
		if v.a != nil && v.a.err != nil {
			return "<invalid: " + v.a.err.Error() + ">"
		}
		return "<invalid>"
	}
	if v.Type().isSigned() {
		return strconv.FormatInt(int64(v.n), 10)
	}
	return strconv.FormatUint(v.n, 10)
}

func quoteCut(s string, max int) string {
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:cut]), len(s))
}
