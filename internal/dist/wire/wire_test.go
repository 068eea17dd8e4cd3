package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

var testLimits = Limits{Data: 1 << 20, Control: 1 << 16, Small: 1 << 10}

func TestRoundTrip(t *testing.T) {
	h := Header{Type: TypeData, Stripe: 1, Stripes: 3, Tag: Tag{Step: 1<<40 + 7, Seq: 9, Op: OpRingRS}}
	payload := []byte("hello, ranks")
	frame := Append(nil, h, payload)
	if len(frame) != HeaderSize+len(payload) {
		t.Fatalf("frame is %d bytes, want %d", len(frame), HeaderSize+len(payload))
	}
	var hdr [HeaderSize]byte
	got, p, err := ReadFrame(bytes.NewReader(frame), hdr[:], nil, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	h.Length = uint32(len(payload))
	if got != h || !bytes.Equal(p, payload) {
		t.Fatalf("got %+v %q, want %+v %q", got, p, h, payload)
	}
}

func TestBufferReused(t *testing.T) {
	frame := Append(nil, Header{Type: TypeData, Tag: Tag{Op: OpBench}}, make([]byte, 100))
	buf := make([]byte, 0, 4096)
	var hdr [HeaderSize]byte
	_, p, err := ReadFrame(bytes.NewReader(frame), hdr[:], buf, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if &p[0] != &buf[:1][0] {
		t.Fatal("payload was not read into the caller's buffer")
	}
}

func TestMalformed(t *testing.T) {
	good := Append(nil, Header{Type: TypeControl, Tag: Tag{Op: OpStep}}, []byte("x"))
	mod := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	tests := []struct {
		name  string
		frame []byte
		want  string
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n......"), `bad magic "GET "`},
		{"version", mod(func(b []byte) { b[3] = 9 }), "frame format version 9"},
		{"type 0", mod(func(b []byte) { b[4] = 0 }), "unknown frame type 0"},
		{"type 200", mod(func(b []byte) { b[4] = 200 }), "unknown frame type 200"},
		{"flags", mod(func(b []byte) { b[5] = 0x80 }), "unknown flags 0x80"},
		{"stripes 0", mod(func(b []byte) { b[7] = 0 }), "stripe 0 of 0"},
		{"stripe index", mod(func(b []byte) { b[6], b[7] = 2, 2 }), "stripe 2 of 2"},
		{"striped control", mod(func(b []byte) { b[6], b[7] = 0, 2 }), "control frame striped"},
		{"op", mod(func(b []byte) { b[20] = 250 }), "unknown op 250"},
		{"huge length", mod(func(b []byte) { b[24], b[25], b[26], b[27] = 0xff, 0xff, 0xff, 0xff }), "control frame of 4294967295 bytes exceeds the limit of 65536"},
		{"reserved", mod(func(b []byte) { b[30] = 1 }), "reserved header word"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hdr [HeaderSize]byte
			_, _, err := ReadFrame(bytes.NewReader(tc.frame), hdr[:], nil, testLimits)
			if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a malformed-frame error containing %q", err, tc.want)
			}
		})
	}
}

func TestTruncated(t *testing.T) {
	frame := Append(nil, Header{Type: TypeData, Tag: Tag{Op: OpBench}}, make([]byte, 64))
	var hdr [HeaderSize]byte
	if _, _, err := ReadFrame(bytes.NewReader(frame[:10]), hdr[:], nil, testLimits); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short header: got %v, want unexpected EOF", err)
	}
	_, _, err := ReadFrame(bytes.NewReader(frame[:50]), hdr[:], nil, testLimits)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "64-byte payload") {
		t.Fatalf("short payload: got %v", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader(nil), hdr[:], nil, testLimits); err != io.EOF {
		t.Fatalf("empty stream: got %v, want io.EOF (a clean close)", err)
	}
}

func TestTableDigestStable(t *testing.T) {
	if a, b := TableDigest(), TableDigest(); a != b || len(a) != 16 {
		t.Fatalf("digest %q then %q", a, b)
	}
	for o := Op(0); o < opEnd; o++ {
		if strings.HasPrefix(o.String(), "op(") {
			t.Fatalf("op %d has no name", o)
		}
	}
}

// FuzzReadFrame feeds arbitrary bytes to the decoder: it must return frames
// or errors, never panic, never allocate past the limits, and every frame it
// accepts must encode back to the same bytes.
func FuzzReadFrame(f *testing.F) {
	f.Add(Append(nil, Header{Type: TypeData, Tag: Tag{Step: 1, Seq: 2, Op: OpAllReduce1}}, []byte{1, 2, 3, 4}))
	f.Add(Append(Append(nil, Header{Type: TypePing, Tag: Tag{Step: 5}}, nil), Header{Type: TypeError}, []byte("no")))
	f.Add(Append(nil, Header{Type: TypeData, Stripe: 1, Stripes: 2, Tag: Tag{Op: OpRingAG}}, make([]byte, 33)))
	f.Add([]byte("BRD\x01\x03\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00"))
	f.Add([]byte("garbage that is not a frame at all, longer than a header"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var hdr [HeaderSize]byte
		var buf []byte
		for {
			off := len(data) - r.Len()
			h, p, err := ReadFrame(r, hdr[:], buf, testLimits)
			if err != nil {
				return
			}
			if uint32(len(p)) > testLimits.Max(h.Type) {
				t.Fatalf("accepted %d bytes for %s, limit %d", len(p), h.Type, testLimits.Max(h.Type))
			}
			if re := Append(nil, h, p); !bytes.Equal(re, data[off:off+len(re)]) {
				t.Fatalf("re-encoding differs:\n%x\n%x", re, data[off:off+len(re)])
			}
			buf = p
		}
	})
}

func TestEveryTypeAndOpParses(t *testing.T) {
	for ty := Type(1); ty < typeEnd; ty++ {
		for op := Op(0); op < opEnd; op++ {
			h := Header{Type: ty, Stripes: 1, Tag: Tag{Step: 3, Seq: 4, Op: op}}
			var b [HeaderSize]byte
			Put(b[:], &h)
			got, err := Parse(b[:], testLimits)
			if err != nil || got != h {
				t.Fatalf("%s/%s: got %+v, %v", ty, op, got, err)
			}
		}
		if strings.HasPrefix(ty.String(), "type(") {
			t.Fatalf("type %d has no name", ty)
		}
	}
}
