package gguf

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestValueAccessors(t *testing.T) {
	type res struct {
		i  int64
		ok bool
	}
	tests := []struct {
		name  string
		v     Value
		typ   ValueType
		i     res
		u     uint64
		uok   bool
		f     float64
		fok   bool
		b     bool
		bok   bool
		s     string
		sok   bool
		slen  int
		selem ValueType
	}{
		{name: "uint8", v: Uint8(255), typ: TypeUint8, i: res{255, true}, u: 255, uok: true, f: 255, fok: true, selem: TypeInvalid},
		{name: "int8", v: Int8(-1), typ: TypeInt8, i: res{-1, true}, f: -1, fok: true, selem: TypeInvalid},
		{name: "uint16", v: Uint16(65535), typ: TypeUint16, i: res{65535, true}, u: 65535, uok: true, f: 65535, fok: true, selem: TypeInvalid},
		{name: "int16", v: Int16(-300), typ: TypeInt16, i: res{-300, true}, f: -300, fok: true, selem: TypeInvalid},
		{name: "uint32", v: Uint32(math.MaxUint32), typ: TypeUint32, i: res{math.MaxUint32, true}, u: math.MaxUint32, uok: true, f: math.MaxUint32, fok: true, selem: TypeInvalid},
		{name: "int32", v: Int32(math.MinInt32), typ: TypeInt32, i: res{math.MinInt32, true}, f: math.MinInt32, fok: true, selem: TypeInvalid},
		{name: "uint64 max", v: Uint64(math.MaxUint64), typ: TypeUint64, u: math.MaxUint64, uok: true, f: math.MaxUint64, fok: true, selem: TypeInvalid},
		{name: "int64 min", v: Int64(math.MinInt64), typ: TypeInt64, i: res{math.MinInt64, true}, f: math.MinInt64, fok: true, selem: TypeInvalid},
		{name: "float32", v: Float32(1.5), typ: TypeFloat32, f: 1.5, fok: true, selem: TypeInvalid},
		{name: "float64", v: Float64(-2.25), typ: TypeFloat64, f: -2.25, fok: true, selem: TypeInvalid},
		{name: "bool", v: Bool(true), typ: TypeBool, b: true, bok: true, selem: TypeInvalid},
		{name: "string", v: String("llama"), typ: TypeString, s: "llama", sok: true, selem: TypeInvalid},
		{name: "array", v: Int32Array([]int32{1, 2, 3}), typ: TypeArray, slen: 3, selem: TypeInt32},
		{name: "zero", v: Value{}, typ: TypeInvalid, selem: TypeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.v
			if v.Type() != tt.typ {
				t.Errorf("Type = %v, want %v", v.Type(), tt.typ)
			}
			if i, ok := v.Int(); i != tt.i.i || ok != tt.i.ok {
				t.Errorf("Int = %d, %v; want %d, %v", i, ok, tt.i.i, tt.i.ok)
			}
			if u, ok := v.Uint(); u != tt.u || ok != tt.uok {
				t.Errorf("Uint = %d, %v; want %d, %v", u, ok, tt.u, tt.uok)
			}
			if f, ok := v.Float(); f != tt.f || ok != tt.fok {
				t.Errorf("Float = %g, %v; want %g, %v", f, ok, tt.f, tt.fok)
			}
			if b, ok := v.Bool(); b != tt.b || ok != tt.bok {
				t.Errorf("Bool = %v, %v; want %v, %v", b, ok, tt.b, tt.bok)
			}
			if s, ok := v.Str(); s != tt.s || ok != tt.sok {
				t.Errorf("Str = %q, %v; want %q, %v", s, ok, tt.s, tt.sok)
			}
			if v.Len() != tt.slen || v.ElemType() != tt.selem {
				t.Errorf("Len, ElemType = %d, %v; want %d, %v", v.Len(), v.ElemType(), tt.slen, tt.selem)
			}
			if v.IsValid() != (tt.typ != TypeInvalid) {
				t.Errorf("IsValid = %v", v.IsValid())
			}
		})
	}
}

func TestArrayConversions(t *testing.T) {
	tests := []struct {
		name    string
		v       Value
		int32s  []int32
		float32 []float32
		strs    []string
	}{
		{name: "int32", v: Int32Array([]int32{-1, 0, 7}), int32s: []int32{-1, 0, 7}, float32: []float32{-1, 0, 7}},
		{name: "uint8", v: Uint8Array([]uint8{0, 255}), int32s: []int32{0, 255}, float32: []float32{0, 255}},
		{name: "int64 too big for int32", v: Int64Array([]int64{1 << 40}), float32: []float32{1 << 40}},
		{name: "uint32 not exact in float32", v: Uint32Array([]uint32{1<<24 + 1}), int32s: []int32{1<<24 + 1}},
		{name: "uint64 huge", v: Uint64Array([]uint64{math.MaxUint64})},
		{name: "float32", v: Float32Array([]float32{0.5, -1e30}), float32: []float32{0.5, -1e30}},
		{name: "float64 rounds", v: Float64Array([]float64{0.1}), float32: []float32{0.1}},
		{name: "strings", v: StringArray([]string{"a", ""}), strs: []string{"a", ""}},
		{name: "bools", v: BoolArray([]bool{true, false})},
		{name: "empty ints", v: Int32Array(nil), int32s: []int32{}, float32: []float32{}},
		{name: "scalar", v: Int32(3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is, ok := tt.v.Int32s()
			if ok != (tt.int32s != nil) || !reflect.DeepEqual(is, tt.int32s) && ok {
				t.Errorf("Int32s = %v, %v; want %v", is, ok, tt.int32s)
			}
			fs, ok := tt.v.Float32s()
			if ok != (tt.float32 != nil) || !reflect.DeepEqual(fs, tt.float32) && ok {
				t.Errorf("Float32s = %v, %v; want %v", fs, ok, tt.float32)
			}
			ss, ok := tt.v.Strings()
			if ok != (tt.strs != nil) || !reflect.DeepEqual(ss, tt.strs) && ok {
				t.Errorf("Strings = %q, %v; want %q", ss, ok, tt.strs)
			}
		})
	}
}

func TestIndex(t *testing.T) {
	nested := Array(TypeArray, []Value{Int16Array(-1, 2), StringArray([]string{"x"})})
	tests := []struct {
		name string
		v    Value
		i    int
		want Value
	}{
		{"int16", Int16Array(-1, 2), 0, Int16(-1)},
		{"bool", BoolArray([]bool{false, true}), 1, Bool(true)},
		{"string", StringArray([]string{"a", "b"}), 1, String("b")},
		{"nested", nested, 1, StringArray([]string{"x"})},
		{"out of range", nested, 2, Value{}},
		{"negative", nested, -1, Value{}},
		{"scalar", Int32(1), 0, Value{}},
	}
	for _, tt := range tests {
		if got := tt.v.Index(tt.i); !got.Equal(tt.want) {
			t.Errorf("%s: Index(%d) = %v, want %v", tt.name, tt.i, got, tt.want)
		}
	}
}

// Int16Array is a test shorthand for the generic Array constructor.
func Int16Array(xs ...int16) Value {
	vs := make([]Value, len(xs))
	for i, x := range xs {
		vs[i] = Int16(x)
	}
	return Array(TypeInt16, vs)
}

func TestValueString(t *testing.T) {
	many := make([]string, 151936)
	for i := range many {
		many[i] = string(rune('!' + i%90))
	}
	long := strings.Repeat("é", 200)
	tests := []struct {
		v    Value
		want string
	}{
		{Uint8(7), "7"},
		{Int8(-7), "-7"},
		{Uint64(math.MaxUint64), "18446744073709551615"},
		{Float32(0.1), "0.1"},
		{Float64(1e-300), "1e-300"},
		{Bool(true), "true"},
		{String(`a"b`), `"a\"b"`},
		{Int32Array([]int32{1, 2, 3}), "[1, 2, 3]"},
		{StringArray(many), `[151936 strings: "!", "\"", "#", ... ]`},
		{Array(TypeArray, []Value{Int32Array([]int32{1}), StringArray([]string{"x"})}), `[[1], ["x"]]`},
		{String(long), `"` + strings.Repeat("é", 100) + `"... (400 bytes)`},
		{Value{}, "<invalid>"},
		{Array(TypeUint8, []Value{String("x")}), "<invalid: Array: element 0 is string, want uint8>"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("String() = %s, want %s", got, tt.want)
		}
	}
}

func TestValueTypeString(t *testing.T) {
	for ty, want := range map[ValueType]string{TypeUint8: "uint8", TypeArray: "array", TypeFloat64: "float64", 13: "type(13)", TypeInvalid: "invalid"} {
		if got := ty.String(); got != want {
			t.Errorf("%d: %q, want %q", uint32(ty), got, want)
		}
	}
}
