package quant_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"testing"
)

// refDir holds llama.cpp's reference quantizations (see its README.md).
const refDir = "../../../shared/testdata/quants/"

type refTensor struct {
	Type  uint32
	Shape []int64
	Data  []byte
}

// refFile is a minimal GGUF reader, enough for the reference files.
type refFile map[string]refTensor

func loadRef(t *testing.T, name string) refFile {
	t.Helper()
	b, err := os.ReadFile(refDir + name)
	if err != nil {
		t.Skipf("reference data not available (%v); it lives in the shared checkout", err)
	}
	f, err := parseRef(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

func parseRef(b []byte) (refFile, error) {
	p := 0
	u32 := func() uint32 { v := binary.LittleEndian.Uint32(b[p:]); p += 4; return v }
	u64 := func() uint64 { v := binary.LittleEndian.Uint64(b[p:]); p += 8; return v }
	str := func() string { n := int(u64()); s := string(b[p : p+n]); p += n; return s }
	if string(b[:4]) != "GGUF" {
		return nil, fmt.Errorf("not a GGUF file")
	}
	p = 4
	u32()
	nt, nkv := u64(), u64()
	align := uint64(32)
	size := map[uint32]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
	var skip func(typ uint32)
	skip = func(typ uint32) {
		switch typ {
		case 8:
			str()
		case 9:
			et := u32()
			n := u64()
			for i := uint64(0); i < n; i++ {
				skip(et)
			}
		default:
			p += size[typ]
		}
	}
	for i := uint64(0); i < nkv; i++ {
		k := str()
		typ := u32()
		if k == "general.alignment" && typ == 4 {
			align = uint64(binary.LittleEndian.Uint32(b[p:]))
		}
		skip(typ)
	}
	type info struct {
		name  string
		shape []int64
		typ   uint32
		off   uint64
	}
	var infos []info
	for i := uint64(0); i < nt; i++ {
		in := info{name: str()}
		nd := u32()
		for j := uint32(0); j < nd; j++ {
			in.shape = append(in.shape, int64(u64()))
		}
		in.typ = u32()
		in.off = u64()
		infos = append(infos, in)
	}
	base := (uint64(p) + align - 1) / align * align
	f := refFile{}
	sizes := map[uint32][2]int{0: {1, 4}, 1: {1, 2}, 30: {1, 2}, 2: {32, 18}, 3: {32, 20}, 6: {32, 22}, 7: {32, 24},
		8: {32, 34}, 9: {32, 36}, 10: {256, 84}, 11: {256, 110}, 12: {256, 144}, 13: {256, 176}, 14: {256, 210},
		15: {256, 292}, 20: {32, 18}, 23: {256, 136}, 39: {32, 17}, 40: {64, 36}}
	for _, in := range infos {
		n := int64(1)
		for _, d := range in.shape {
			n *= d
		}
		s, ok := sizes[in.typ]
		if !ok {
			return nil, fmt.Errorf("tensor %s: unexpected type %d", in.name, in.typ)
		}
		nb := n / int64(s[0]) * int64(s[1])
		start := base + in.off
		f[in.name] = refTensor{in.typ, in.shape, b[start : start+uint64(nb)]}
	}
	return f, nil
}

func (f refFile) f32(t *testing.T, name string) []float32 {
	t.Helper()
	r, ok := f[name]
	if !ok || r.Type != 0 {
		t.Fatalf("reference tensor %s missing or not F32", name)
	}
	out := make([]float32, len(r.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(r.Data[4*i:]))
	}
	return out
}
