// Package quant describes the ggml block formats that GGUF tensors are stored in,
// and converts between them and float32: dequantization (bit-identical to
// llama.cpp), quantization, and row/column slicing for tensor parallelism.
package quant

import "fmt"

// Type is a ggml tensor type, numbered as in GGUF files.
type Type uint32

// The ggml type ids. The numbering is part of the GGUF format.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
	NVFP4   Type = 40
	Q1_0    Type = 41
	Q2_0    Type = 42
)

// traits is what the file layer needs to know of a type: its name, how many
// values a block holds and how many bytes a block takes.
type traits struct {
	name      string
	blockSize int
	typeSize  int
}

var table = map[Type]traits{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	Q4_0:    {"Q4_0", 32, 18},
	Q4_1:    {"Q4_1", 32, 20},
	Q5_0:    {"Q5_0", 32, 22},
	Q5_1:    {"Q5_1", 32, 24},
	Q8_0:    {"Q8_0", 32, 34},
	Q8_1:    {"Q8_1", 32, 36},
	Q2_K:    {"Q2_K", 256, 84},
	Q3_K:    {"Q3_K", 256, 110},
	Q4_K:    {"Q4_K", 256, 144},
	Q5_K:    {"Q5_K", 256, 176},
	Q6_K:    {"Q6_K", 256, 210},
	Q8_K:    {"Q8_K", 256, 292},
	IQ2_XXS: {"IQ2_XXS", 256, 66},
	IQ2_XS:  {"IQ2_XS", 256, 74},
	IQ3_XXS: {"IQ3_XXS", 256, 98},
	IQ1_S:   {"IQ1_S", 256, 50},
	IQ4_NL:  {"IQ4_NL", 32, 18},
	IQ3_S:   {"IQ3_S", 256, 110},
	IQ2_S:   {"IQ2_S", 256, 82},
	IQ4_XS:  {"IQ4_XS", 256, 136},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	IQ1_M:   {"IQ1_M", 256, 56},
	BF16:    {"BF16", 1, 2},
	TQ1_0:   {"TQ1_0", 256, 54},
	TQ2_0:   {"TQ2_0", 256, 66},
	MXFP4:   {"MXFP4", 32, 17},
	NVFP4:   {"NVFP4", 64, 36},
	Q1_0:    {"Q1_0", 128, 18},
	Q2_0:    {"Q2_0", 64, 18},
}

// Known reports whether t is a type whose block layout this package knows.
func (t Type) Known() bool { _, ok := table[t]; return ok }

// String returns ggml's upper-case name of the type, or "type(N)".
func (t Type) String() string {
	if tr, ok := table[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of values one block encodes (1 for plain types).
// It is 0 for an unknown type.
func (t Type) BlockSize() int { return table[t].blockSize }

// TypeSize is the number of bytes one block occupies. It is 0 for an unknown type.
func (t Type) TypeSize() int { return table[t].typeSize }

// RowBytes returns the bytes taken by n values of type t, and an error when t
// is unknown or n is not a whole number of blocks.
func (t Type) RowBytes(n int64) (int64, error) {
	tr, ok := table[t]
	if !ok {
		return 0, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	if n < 0 || n%int64(tr.blockSize) != 0 {
		return 0, fmt.Errorf("%s: %d values is not a whole number of %d-value blocks", tr.name, n, tr.blockSize)
	}
	return n / int64(tr.blockSize) * int64(tr.typeSize), nil
}

// ParseType returns the type with ggml's name s (case-insensitive), as in "q4_K".
func ParseType(s string) (Type, error) {
	for t, tr := range table {
		if equalFold(tr.name, s) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown tensor type name %q", s)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
