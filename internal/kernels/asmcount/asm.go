package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A macro is a #define of a Go assembly file: object-like when params is
// nil, function-like otherwise.
type macro struct {
	params []string
	body   string
}

// stmt is one assembly statement after macro expansion.
type stmt struct {
	label string // "name" for a "name:" line, else ""
	op    string // upper-case mnemonic with its suffixes (VLD1.P, VMOVDQU8.Z)
	args  string
	// decoded is, for a WORD, the instruction its comment says it encodes
	// (the arm64 generators write "WORD $0x... // sdot v3.4s, ..."), in
	// lower-case GNU syntax; "" if there is no comment.
	decoded string
}

var (
	// wordComment catches the comment after a WORD before comments are
	// stripped, and keeps it in braces, which Go assembly does not use.
	wordComment  = regexp.MustCompile(`(WORD\s+\$0x[0-9a-fA-F]+)\s*(?://\s*([^\n]*)|/\*\s*(.*?)\s*\*/)`)
	blockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	defineHead   = regexp.MustCompile(`^#define\s+(\w+)(\(([^)]*)\))?\s*(.*)$`)
	ident        = regexp.MustCompile(`\w+`)
)

// stripLineComment removes a // comment; Go assembly has no string
// literals in the files this tool reads, so no quoting to respect.
func stripLineComment(s string) string {
	if i := strings.Index(s, "//"); i >= 0 {
		return s[:i]
	}
	return s
}

// parseFile expands the macros of a Go assembly source and returns the
// statements of each TEXT symbol by name (without the middle dot and
// package qualifier).
func parseFile(src string) (map[string][]stmt, error) {
	src = wordComment.ReplaceAllStringFunc(src, func(m string) string {
		g := wordComment.FindStringSubmatch(m)
		text := strings.TrimSpace(g[2] + g[3])
		text = strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(text, `\`)), "*/")
		tail := ""
		if strings.HasSuffix(strings.TrimRight(m, " \t"), `\`) {
			tail = ` \`
		}
		return g[1] + " {" + strings.TrimSpace(text) + "}" + tail
	})
	src = blockComment.ReplaceAllString(src, " ")
	lines := strings.Split(src, "\n")
	macros := map[string]macro{}
	var logical []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(strings.TrimSpace(l), "#define") {
			// Continuation lines keep their line breaks: each is one
			// statement of the body.
			var body []string
			head := stripLineComment(l)
			for strings.HasSuffix(strings.TrimRight(head, " \t"), `\`) && i+1 < len(lines) {
				body = append(body, strings.TrimSuffix(strings.TrimRight(head, " \t"), `\`))
				i++
				head = stripLineComment(lines[i])
			}
			body = append(body, head)
			m := defineHead.FindStringSubmatch(strings.TrimSpace(body[0]))
			if m == nil {
				return nil, fmt.Errorf("line %d: cannot read #define %q", i+1, body[0])
			}
			var params []string
			if m[2] != "" {
				params = []string{}
				for _, p := range strings.Split(m[3], ",") {
					if p = strings.TrimSpace(p); p != "" {
						params = append(params, p)
					}
				}
			}
			text := append([]string{m[4]}, body[1:]...)
			macros[m[1]] = macro{params: params, body: strings.Join(text, "\n")}
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue // #include, #ifdef: none changes the instruction stream here
		}
		logical = append(logical, stripLineComment(l))
	}

	out := map[string][]stmt{}
	var cur string
	for _, l := range logical {
		for _, s := range expand(l, macros, 0) {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			if strings.HasPrefix(s, "TEXT") {
				name := strings.Fields(s)[1]
				name = strings.TrimSuffix(name[strings.LastIndex(name, "·")+len("·"):], "(SB),")
				cur = strings.TrimSuffix(name, "(SB)")
				out[cur] = nil
				continue
			}
			if strings.HasPrefix(s, "DATA") || strings.HasPrefix(s, "GLOBL") {
				cur = ""
				continue
			}
			if cur == "" {
				continue
			}
			if i := strings.Index(s, ":"); i > 0 && ident.FindString(s[:i]) == s[:i] {
				out[cur] = append(out[cur], stmt{label: s[:i]})
				if s = strings.TrimSpace(s[i+1:]); s == "" {
					continue
				}
			}
			op, args, _ := strings.Cut(s, " ")
			st := stmt{op: strings.ToUpper(op), args: strings.TrimSpace(args)}
			if st.op == "WORD" {
				if i := strings.Index(st.args, "{"); i >= 0 {
					st.decoded = strings.ToLower(strings.Trim(st.args[i:], "{} "))
					st.args = strings.TrimSpace(st.args[:i])
				}
			}
			out[cur] = append(out[cur], st)
		}
	}
	return out, nil
}

// expand replaces macro uses in one line, recursively, and splits the
// result into statements (at line breaks of macro bodies and at ';').
func expand(line string, macros map[string]macro, depth int) []string {
	if depth > 20 {
		return []string{line}
	}
	parts := strings.Split(line, ";")
	if len(parts) > 1 && allBytes(parts) {
		// BYTE $a; BYTE $b; ... on one line encodes one instruction the
		// assembler lacks (VDPBF16PS): one statement.
		return []string{"BYTES " + strings.Join(parts, ";")}
	}
	var out []string
	for _, part := range parts {
		t := strings.TrimSpace(part)
		name := ident.FindString(t)
		m, ok := macros[name]
		if !ok || !strings.HasPrefix(t, name) {
			out = append(out, part)
			continue
		}
		body := m.body
		if m.params != nil {
			rest := strings.TrimSpace(t[len(name):])
			if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
				out = append(out, part)
				continue
			}
			args := splitArgs(rest[1 : len(rest)-1])
			body = ident.ReplaceAllStringFunc(body, func(w string) string {
				for i, p := range m.params {
					if w == p && i < len(args) {
						return args[i]
					}
				}
				return w
			})
		}
		for _, l := range strings.Split(body, "\n") {
			out = append(out, expand(l, macros, depth+1)...)
		}
	}
	return out
}

func allBytes(parts []string) bool {
	for _, p := range parts {
		if !strings.HasPrefix(strings.TrimSpace(p), "BYTE ") {
			return false
		}
	}
	return true
}

// splitArgs splits macro arguments at the commas outside parentheses.
func splitArgs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// isBranch reports whether op transfers control, and whether it is
// conditional on nothing (an unconditional jump).
func isBranch(op string) bool {
	switch {
	case strings.HasPrefix(op, "J"): // amd64: JMP, JNZ, JLT, ...
		return true
	case op == "B" || op == "CBZ" || op == "CBNZ" || op == "TBZ" || op == "TBNZ":
		return true
	case len(op) == 3 && op[0] == 'B' && strings.Contains("EQ NE LT LE GT GE HI HS LO LS MI PL CS CC VS VC", op[1:]):
		return true
	}
	return false
}

// branchTarget is the label a branch statement names (its last operand).
func branchTarget(s stmt) string {
	f := strings.Split(s.args, ",")
	return strings.TrimSpace(f[len(f)-1])
}

// loop is one backward branch: statements [start, end] of a kernel.
type loop struct {
	label      string
	start, end int
}

// loops lists the backward branches of a kernel's statements.
func loops(ss []stmt) []loop {
	at := map[string]int{}
	var out []loop
	for i, s := range ss {
		if s.label != "" {
			at[s.label] = i
			continue
		}
		if isBranch(s.op) {
			if j, ok := at[branchTarget(s)]; ok {
				out = append(out, loop{label: branchTarget(s), start: j, end: i})
			}
		}
	}
	return out
}

// weightReg finds the register the kernel loads its weight pointer into:
// the destination of the move from w+0(FP) (K-quant signature) or
// w_base+8(FP) (row-dot signature).
func weightReg(ss []stmt) (string, error) {
	for _, s := range ss {
		if (s.op == "MOVQ" || s.op == "MOVD") && (strings.HasPrefix(s.args, "w+0(FP)") || strings.HasPrefix(s.args, "w_base+8(FP)")) {
			f := strings.Split(s.args, ",")
			return strings.TrimSpace(f[len(f)-1]), nil
		}
	}
	return "", fmt.Errorf("no move of the weight pointer w from the frame")
}

var (
	addImm  = regexp.MustCompile(`^\$(-?\d+),\s*(\w+)$`)        // ADDQ $k, SI / ADD $k, R0
	leaSelf = regexp.MustCompile(`^(-?\d+)\((\w+)\),\s*(\w+)$`) // LEAQ k(SI), SI
	postIdx = regexp.MustCompile(`^\$?(-?\d+)\((\w+)\),`)       // VLD1.P 32(R0), [...]
	// The same in the GNU syntax of a WORD's comment: add x0, x0, #66;
	// a post-indexed [x0], #32; a pre-indexed [x0, #32]!.
	wordAdd  = regexp.MustCompile(`^add\s+(x\d+),\s*(x\d+),\s*#(-?(?:0x)?[0-9a-f]+)$`)
	wordPost = regexp.MustCompile(`\[(x\d+)\],\s*#(-?(?:0x)?[0-9a-f]+)$`)
	wordPre  = regexp.MustCompile(`\[(x\d+),\s*#(-?(?:0x)?[0-9a-f]+)\]!$`)
)

// advance is how many bytes the statements add to register r: immediate
// adds (ADDQ/ADD with two operands), LEAQ onto itself, and post-indexed
// loads (.P) through r.
func advance(ss []stmt, r string) int {
	n := 0
	for _, s := range ss {
		switch {
		case s.op == "ADDQ" || s.op == "ADD":
			if m := addImm.FindStringSubmatch(s.args); m != nil && m[2] == r {
				k, _ := strconv.Atoi(m[1])
				n += k
			}
		case s.op == "SUBQ" || s.op == "SUB":
			if m := addImm.FindStringSubmatch(s.args); m != nil && m[2] == r {
				k, _ := strconv.Atoi(m[1])
				n -= k
			}
		case s.op == "LEAQ":
			if m := leaSelf.FindStringSubmatch(s.args); m != nil && m[2] == r && m[3] == r {
				k, _ := strconv.Atoi(m[1])
				n += k
			}
		case strings.HasSuffix(s.op, ".P"):
			if m := postIdx.FindStringSubmatch(s.args); m != nil && m[2] == r {
				k, _ := strconv.Atoi(m[1])
				n += k
			}
		case s.op == "WORD" && strings.HasPrefix(r, "R"):
			x := "x" + r[1:]
			if m := wordAdd.FindStringSubmatch(s.decoded); m != nil && m[1] == x && m[2] == x {
				k, _ := strconv.ParseInt(m[3], 0, 64)
				n += int(k)
			} else if m := wordPost.FindStringSubmatch(s.decoded); m != nil && m[1] == x {
				k, _ := strconv.ParseInt(m[2], 0, 64)
				n += int(k)
			} else if m := wordPre.FindStringSubmatch(s.decoded); m != nil && m[1] == x {
				k, _ := strconv.ParseInt(m[2], 0, 64)
				n += int(k)
			}
		}
	}
	return n
}

// isVector reports whether a statement runs on the SIMD/floating-point
// side: it names a vector, mask or float register (X/Y/Z/K on amd64, V/F on
// arm64), or it is a WORD, which the arm64 files use only to encode vector
// instructions the Go assembler lacks (SDOT, FMLA, ...).
var vecReg = regexp.MustCompile(`\b([XYZ]\d{1,2}|K[1-7]|[VF]\d{1,2})\b`)

var armVecReg = regexp.MustCompile(`\b[vqdshb]\d{1,2}\b`)

func isVector(s stmt) bool {
	switch s.op {
	case "WORD":
		// Without a comment saying what it encodes, a WORD is one of the
		// vector instructions the assembler lacks.
		return s.decoded == "" || armVecReg.MatchString(s.decoded)
	case "BYTES":
		return true // EVEX-encoded (the only BYTE runs in these files)
	}
	if strings.HasPrefix(s.op, "PREFETCH") {
		return false
	}
	return vecReg.MatchString(s.args)
}
