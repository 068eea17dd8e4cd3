// Package wire is braid's frame format between ranks: a fixed 32-byte header
// followed by a payload, every field checked before anything is allocated or
// read, so that a peer sending garbage costs one closed connection and a log
// line, never a crash or an unbounded allocation.
//
// Header layout, little-endian:
//
//	offset size field
//	0      4    magic "BRD\x01"
//	4      1    type (Hello, Auth, Data, Control, Ping, Pong, Error, Close)
//	5      1    flags (no bit defined yet: any set bit is refused)
//	6      1    stripe index of this part (0 when not striped)
//	7      1    stripes: parts of the message (1 when not striped)
//	8      8    tag.Step: decode step or request id
//	16     4    tag.Seq: message number on this pair within the step
//	20     4    tag.Op: what the message is for (see Op)
//	24     4    payload length in bytes
//	28     4    reserved, must be zero
package wire

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// HeaderSize is the size of every frame header in bytes.
const HeaderSize = 32

// Magic starts every frame; the last byte is the frame-format version, so a
// peer from an incompatible format is refused at its first byte.
const Magic uint32 = 'B' | 'R'<<8 | 'D'<<16 | 1<<24

// MaxStripes bounds the connections one message may be striped over.
const MaxStripes = 16

// Type says what a frame carries and so which payload limit applies.
type Type uint8

// Frame types. Their numbers are part of the protocol: append, never reorder.
const (
	TypeHello   Type = 1 // handshake facts (JSON)
	TypeAuth    Type = 2 // handshake proof of the shared secret
	TypeData    Type = 3 // collective or point-to-point tensor data
	TypeControl Type = 4 // step protocol: requests and results
	TypePing    Type = 5 // liveness probe, answered by TypePong with the same tag
	TypePong    Type = 6
	TypeError   Type = 7 // a refusal or failure message (UTF-8 text) before closing
	TypeClose   Type = 8 // orderly goodbye
	typeEnd     Type = 9 // one past the last valid type
)

var typeNames = [...]string{"", "hello", "auth", "data", "control", "ping", "pong", "error", "close"}

func (t Type) String() string {
	if t > 0 && t < typeEnd {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Op says which operation a data or control frame belongs to; receivers check
// it so that two ranks that disagree on what comes next fail loudly instead
// of summing the wrong tensors.
type Op uint32

// Operations. Append only: their numbers and names are hashed into the build
// digest (TableDigest), so peers with different tables refuse each other.
const (
	OpNone        Op = iota
	OpAllReduce1     // one-shot all-reduce: full vector to every peer
	OpReduceScat2    // two-shot all-reduce, reduce-scatter phase
	OpAllGather2     // two-shot all-reduce, all-gather phase
	OpRingRS         // ring all-reduce, reduce-scatter phase
	OpRingAG         // ring all-reduce, all-gather phase
	OpBroadcast
	OpGather
	OpSendRecv // point to point, e.g. a hidden state between pipeline stages
	OpBench    // netbench traffic
	OpStep     // step protocol: one Step to a worker
	OpResult   // step protocol: the worker's result
	OpShm      // forming a mesh: a same-host pair's shared-memory offer and answer
	opEnd
)

var opNames = [...]string{"none", "allreduce-oneshot", "reducescatter-twoshot", "allgather-twoshot",
	"ring-reducescatter", "ring-allgather", "broadcast", "gather", "sendrecv", "bench", "step", "result", "shm"}

func (o Op) String() string {
	if o < opEnd {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint32(o))
}

// TableDigest hashes the frame types, ops and header layout, so that a change
// to any of them changes the build digest peers compare in the handshake.
func TableDigest() string {
	h := sha256.New()
	fmt.Fprintf(h, "magic=%08x header=%d stripes=%d\n", Magic, HeaderSize, MaxStripes)
	for t := Type(1); t < typeEnd; t++ {
		fmt.Fprintf(h, "type %d %s\n", t, t)
	}
	for o := Op(0); o < opEnd; o++ {
		fmt.Fprintf(h, "op %d %s\n", o, o)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Tag names a message so the receiver can check it is the one it expects:
// the step (or request id), the message's number on this pair within the
// step, and the operation.
type Tag struct {
	Step uint64
	Seq  uint32
	Op   Op
}

func (t Tag) String() string { return fmt.Sprintf("step=%d seq=%d op=%s", t.Step, t.Seq, t.Op) }

// Header is a decoded frame header.
type Header struct {
	Type    Type
	Flags   uint8
	Stripe  uint8
	Stripes uint8
	Tag     Tag
	Length  uint32
}

// Limits bounds payload lengths by frame type. Data frames may carry weights
// (up to a GiB); everything else is small, so a stray huge length on a
// control frame is refused long before it could be allocated.
type Limits struct {
	Data    uint32 // TypeData
	Control uint32 // TypeControl
	Small   uint32 // every other type
}

// DefaultLimits: 1 GiB data, 64 MiB control (full logits of a batch), 64 KiB
// for handshake, ping and error frames.
var DefaultLimits = Limits{Data: 1 << 30, Control: 64 << 20, Small: 64 << 10}

// Max returns the payload limit for frames of type t.
func (l Limits) Max(t Type) uint32 {
	switch t {
	case TypeData:
		return l.Data
	case TypeControl:
		return l.Control
	}
	return l.Small
}

// ErrMalformed is wrapped by every error about a frame's content (as opposed
// to the connection failing), so callers can tell a misbehaving peer from a
// broken link.
var ErrMalformed = errors.New("malformed frame")

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, a...))
}

// Put encodes h into b, which must hold HeaderSize bytes.
func Put(b []byte, h *Header) {
	_ = b[HeaderSize-1]
	binary.LittleEndian.PutUint32(b[0:], Magic)
	b[4] = byte(h.Type)
	b[5] = h.Flags
	b[6] = h.Stripe
	b[7] = h.Stripes
	binary.LittleEndian.PutUint64(b[8:], h.Tag.Step)
	binary.LittleEndian.PutUint32(b[16:], h.Tag.Seq)
	binary.LittleEndian.PutUint32(b[20:], uint32(h.Tag.Op))
	binary.LittleEndian.PutUint32(b[24:], h.Length)
	binary.LittleEndian.PutUint32(b[28:], 0)
}

// Parse decodes and checks a header against lim. The error names the field
// that is wrong and its value.
func Parse(b []byte, lim Limits) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, malformed("header is %d bytes, want %d", len(b), HeaderSize)
	}
	if m := binary.LittleEndian.Uint32(b[0:]); m != Magic {
		if m&0xffffff == Magic&0xffffff {
			return h, malformed("frame format version %d, this build speaks %d", m>>24, Magic>>24)
		}
		return h, malformed("bad magic \"%s\" (not a braid peer?)", printable(b[:4]))
	}
	h.Type = Type(b[4])
	if h.Type == 0 || h.Type >= typeEnd {
		return h, malformed("unknown frame type %d", b[4])
	}
	h.Flags = b[5]
	if h.Flags != 0 {
		return h, malformed("unknown flags %#02x on %s frame", h.Flags, h.Type)
	}
	h.Stripe, h.Stripes = b[6], b[7]
	if h.Stripes == 0 || h.Stripes > MaxStripes || h.Stripe >= h.Stripes {
		return h, malformed("stripe %d of %d on %s frame (at most %d stripes)", h.Stripe, h.Stripes, h.Type, MaxStripes)
	}
	if h.Stripes > 1 && h.Type != TypeData {
		return h, malformed("%s frame striped over %d connections: only data frames may be", h.Type, h.Stripes)
	}
	h.Tag.Step = binary.LittleEndian.Uint64(b[8:])
	h.Tag.Seq = binary.LittleEndian.Uint32(b[16:])
	h.Tag.Op = Op(binary.LittleEndian.Uint32(b[20:]))
	if h.Tag.Op >= opEnd {
		return h, malformed("unknown op %d on %s frame", uint32(h.Tag.Op), h.Type)
	}
	h.Length = binary.LittleEndian.Uint32(b[24:])
	if max := lim.Max(h.Type); h.Length > max {
		return h, malformed("%s frame of %d bytes exceeds the limit of %d", h.Type, h.Length, max)
	}
	if r := binary.LittleEndian.Uint32(b[28:]); r != 0 {
		return h, malformed("reserved header word is %#x, want 0", r)
	}
	return h, nil
}

func printable(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		if c >= 0x20 && c < 0x7f {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "\\x%02x", c)
		}
	}
	return sb.String()
}

// ReadFrame reads one whole frame from r: the header into hdr (HeaderSize
// bytes of scratch the caller keeps), the payload into buf, grown only when
// too small and never past lim. It returns the header and the payload,
// which aliases buf's storage. Callers set any read deadline beforehand.
func ReadFrame(r io.Reader, hdr []byte, buf []byte, lim Limits) (Header, []byte, error) {
	if _, err := io.ReadFull(r, hdr[:HeaderSize]); err != nil {
		return Header{}, buf[:0], err
	}
	h, err := Parse(hdr, lim)
	if err != nil {
		return h, buf[:0], err
	}
	n := int(h.Length)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return h, buf, fmt.Errorf("reading %d-byte payload of %s frame (%s): %w", n, h.Type, h.Tag, err)
	}
	return h, buf, nil
}

// Append appends one encoded frame (header and payload) to dst; used where a
// whole frame is built in memory, e.g. small control frames and tests.
func Append(dst []byte, h Header, payload []byte) []byte {
	h.Length = uint32(len(payload))
	if h.Stripes == 0 {
		h.Stripes = 1
	}
	var b [HeaderSize]byte
	Put(b[:], &h)
	dst = append(dst, b[:]...)
	return append(dst, payload...)
}
