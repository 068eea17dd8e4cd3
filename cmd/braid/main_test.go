package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"braid/internal/gguf"
	"braid/internal/sharedtest"
)

const shared = "../../../shared/testdata"

var braidBin string

// TestMain builds the real binary once; the tests run it as a user would.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "braid-cli-")
	if err != nil {
		panic(err)
	}
	braidBin = filepath.Join(dir, "braid")
	out, err := exec.Command("go", "build", "-o", braidBin, ".").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// braid runs the binary and returns stdout, stderr and the exit status.
func braid(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(braidBin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func needShared(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		sharedtest.Missing(t, "shared test data absent (%s): skipping", path)
	}
}

func TestDoctor(t *testing.T) {
	out, errOut, code := braid(t, "", "doctor")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"build:", "cpu:", "kernels:", "Q4_K", "Q8_0", "memory:", "MemAvailable"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	cmd := exec.Command(braidBin, "doctor")
	cmd.Env = append(os.Environ(), "BRAID_KERNELS=generic")
	gen, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gen), "BRAID_KERNELS=generic") {
		t.Errorf("doctor under BRAID_KERNELS=generic does not say so:\n%s", gen)
	}
	for _, line := range strings.Split(string(gen), "\n") {
		if strings.HasPrefix(line, "  ") && strings.Contains(line, "activations as") && !strings.Contains(line, "generic") {
			t.Errorf("BRAID_KERNELS=generic but a kernel is not generic: %q", line)
		}
	}
}

// TestInspectSharedModels runs inspect on every GGUF under the shared data.
func TestInspectSharedModels(t *testing.T) {
	needShared(t, shared)
	var files []string
	filepath.Walk(shared, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".gguf") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) < 30 {
		t.Fatalf("found only %d GGUF files under %s", len(files), shared)
	}
	for _, f := range files {
		out, errOut, code := braid(t, "", "inspect", f)
		if code != 0 {
			t.Errorf("inspect %s: exit %d: %s", f, code, errOut)
			continue
		}
		if !strings.Contains(out, "metadata (") || !strings.Contains(out, "totals by type:") {
			t.Errorf("inspect %s: output lacks sections:\n%s", f, out)
		}
	}
}

// TestInspectTensorDump dumps every quantized reference tensor and compares
// the floats with llama.cpp's dequantization, bit for bit.
func TestInspectTensorDump(t *testing.T) {
	q := filepath.Join(shared, "quants", "quants.gguf")
	needShared(t, q)
	ref, err := gguf.Open(filepath.Join(shared, "quants", "quants-dequant-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	m, err := gguf.Open(q)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := t.TempDir()
	n := 0
	for _, tt := range m.Tensors {
		want, ok := ref.Tensor(tt.Name)
		if !ok {
			continue
		}
		out := filepath.Join(dir, tt.Name+".f32")
		if _, errOut, code := braid(t, "", "inspect", q, "--tensor", tt.Name, "--out", out); code != 0 {
			t.Errorf("dump %s: exit %d: %s", tt.Name, code, errOut)
			continue
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Data) {
			t.Errorf("%s (%s): dumped floats differ from llama.cpp's dequantization", tt.Name, tt.Type)
		}
		n++
	}
	if n < 15 {
		t.Errorf("compared only %d tensors", n)
	}
	if _, errOut, code := braid(t, "", "inspect", q, "--tensor", "nope", "--out", filepath.Join(dir, "x")); code == 0 || !strings.Contains(errOut, `"nope"`) {
		t.Errorf("unknown tensor: exit %d, stderr %q", code, errOut)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.gguf")
	os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00garbage"), 0o644)
	tests := []struct {
		args     []string
		code     int
		contains string
	}{
		{[]string{"nonsense"}, 2, "unknown command"},
		{[]string{"inspect"}, 2, "want exactly one model"},
		{[]string{"inspect", bad}, 1, "bad.gguf"},
		{[]string{"inspect", filepath.Join(dir, "missing.gguf")}, 1, "missing.gguf"},
		{[]string{"run", "-p", "hi"}, 2, "-m MODEL"},
		{[]string{"bench", "-m", bad, "-r", "0"}, 2, "-r 0"},
		{[]string{"logits", "-m", bad, "--tokens", "1,x", "--out", "o"}, 2, `"x"`},
		{[]string{"template", "--template", "x"}, 2, "--context"},
		{[]string{"run", "-m", bad, "-p", "hi", "--load-mode", "fast"}, 2, `--load-mode "fast": want auto, mmap, read or mlock`},
		{[]string{"bench", "-m", bad, "--load-mode", "mmaped"}, 2, `--load-mode "mmaped"`},
		{[]string{"worker", "--listen", "127.0.0.1:0", "--load-mode", "Read"}, 2, `--load-mode "Read"`},
		{[]string{"serve", "-m", bad, "--responses-store", "-1"}, 2, "--responses-store -1"},
		{[]string{"serve", "-m", bad, "--responses-ttl", "0s"}, 2, "--responses-ttl 0s"},
	}
	for _, tc := range tests {
		_, errOut, code := braid(t, "", tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.contains) {
			t.Errorf("braid %v: exit %d stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.contains)
		}
	}
}

// TestLogitsCommand checks braid logits against llama.cpp's logits for the
// shared reference sequence.
func TestLogitsCommand(t *testing.T) {
	base := filepath.Join(shared, "models", "tiny-qwen3", "tiny-qwen3-F32")
	needShared(t, base+".gguf")
	var g struct {
		Tokens []int32 `json:"tokens"`
	}
	data, _ := os.ReadFile(base + ".json")
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(g.Tokens))
	for i, id := range g.Tokens {
		ids[i] = strings.TrimSpace(strings.Trim(mustJSON(id), `"`))
	}
	out := filepath.Join(t.TempDir(), "l.f32")
	if _, errOut, code := braid(t, "", "logits", "-m", base+".gguf", "--tokens", strings.Join(ids, ","), "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got, _ := os.ReadFile(out)
	want, _ := os.ReadFile(base + ".logits.f32")
	if len(got) != len(want) {
		t.Fatalf("wrote %d bytes, want %d", len(got), len(want))
	}
	worst := 0.0
	for i := 0; i < len(got); i += 4 {
		a := math.Float32frombits(binary.LittleEndian.Uint32(got[i:]))
		b := math.Float32frombits(binary.LittleEndian.Uint32(want[i:]))
		worst = math.Max(worst, math.Abs(float64(a-b)))
	}
	if worst > 2e-3 {
		t.Errorf("logits differ from llama.cpp's by %.3g", worst)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestTemplateCommand renders golden cases through the CLI.
func TestTemplateCommand(t *testing.T) {
	golden := filepath.Join(shared, "templates", "Qwen-Qwen2.5-7B-Instruct.json")
	needShared(t, golden)
	var g struct {
		Template string `json:"template"`
		Cases    []struct {
			Name    string          `json:"name"`
			Context json.RawMessage `json:"context"`
			Output  *string         `json:"output"`
		} `json:"cases"`
	}
	data, _ := os.ReadFile(golden)
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range g.Cases {
		if c.Output == nil {
			continue
		}
		ctx := filepath.Join(dir, c.Name+".json")
		os.WriteFile(ctx, c.Context, 0o644)
		out, errOut, code := braid(t, "", "template", "--template", filepath.Join(shared, "templates", g.Template), "--context", ctx, "--now", "2026-11-26")
		if code != 0 {
			t.Errorf("%s: exit %d: %s", c.Name, code, errOut)
			continue
		}
		if out != *c.Output {
			t.Errorf("%s: render differs from Python jinja2:\n got %q\nwant %q", c.Name, out, *c.Output)
		}
	}
}

func TestTokenizeCommand(t *testing.T) {
	vocab := filepath.Join(shared, "vocab", "ggml-vocab-llama-bpe.gguf")
	needShared(t, vocab)
	out, errOut, code := braid(t, `["Hello world", "", "<|begin_of_text|>x"]`, "tokenize", "-m", vocab, "--no-special", "--parse-special")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var ids [][]int32
	if err := json.Unmarshal([]byte(out), &ids); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if len(ids) != 3 || len(ids[0]) != 2 || len(ids[1]) != 0 || len(ids[2]) != 2 || ids[2][0] != 128000 {
		t.Errorf("got %v", ids)
	}
	if _, errOut, code := braid(t, `{"not": "an array"}`, "tokenize", "-m", vocab); code == 0 || !strings.Contains(errOut, "JSON array") {
		t.Errorf("bad stdin: exit %d, %q", code, errOut)
	}
}

func TestRunAndBench(t *testing.T) {
	model := filepath.Join(shared, "models", "stories260K", "stories260K-F32.gguf")
	needShared(t, model)
	out, errOut, code := braid(t, "", "run", "-m", model, "-p", "Once upon a time", "-n", "20", "--temp", "0")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "Lily") || !strings.Contains(errOut, "generated 20 tokens") {
		t.Errorf("run: stdout %q stderr %q", out, errOut)
	}
	out, errOut, code = braid(t, "", "bench", "-m", model, "-p", "16,32", "-n", "8", "-r", "2", "--json")
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	for _, k := range []string{"model", "threads", "prompt_tokens", "gen_tokens", "prefill_tps_median", "prefill_tps_min", "prefill_tps_max", "decode_tps_median", "decode_tps_min", "decode_tps_max", "peak_rss_bytes"} {
		if _, ok := rows[0][k]; !ok {
			t.Errorf("bench row lacks %q", k)
		}
	}
	if rows[0]["prefill_tps_median"].(float64) <= 0 || rows[1]["decode_tps_median"].(float64) <= 0 {
		t.Errorf("non-positive rates: %v", rows)
	}

	// -np: one row per parallel count, decode only; prefill rows are not
	// repeated for parallel counts when there is no decode test.
	out, errOut, code = braid(t, "", "bench", "-m", model, "-p", "0", "-n", "8", "-np", "1,4", "-r", "2", "--json")
	if code != 0 {
		t.Fatalf("bench -np: exit %d: %s", code, errOut)
	}
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("bench -np --json: %v\n%s", err, out)
	}
	if len(rows) != 2 || rows[0]["parallel"].(float64) != 1 || rows[1]["parallel"].(float64) != 4 {
		t.Fatalf("bench -np 1,4: rows %v", rows)
	}
	for _, r := range rows {
		if r["decode_tps_median"].(float64) <= 0 {
			t.Errorf("bench -np: non-positive decode rate: %v", r)
		}
	}
	// -d: decoding after 40 positions of context; the row says so. A list
	// gives a decode row per depth, and the prefill row once.
	out, errOut, code = braid(t, "", "bench", "-m", model, "-p", "0", "-n", "4", "-d", "40", "-np", "2", "-r", "1", "--json")
	if code != 0 {
		t.Fatalf("bench -d: exit %d: %s", code, errOut)
	}
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0]["depth"].(float64) != 40 || rows[0]["decode_tps_median"].(float64) <= 0 {
		t.Fatalf("bench -d 40: %v %v", err, rows)
	}
	out, errOut, code = braid(t, "", "bench", "-m", model, "-p", "8,0", "-n", "0,4", "-d", "0,40", "-r", "1", "--json")
	if code != 0 {
		t.Fatalf("bench -d 0,40: exit %d: %s", code, errOut)
	}
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("bench -d 0,40: %v", err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("p%v n%v d%v", r["prompt_tokens"], r["gen_tokens"], r["depth"]))
	}
	if want := []string{"p8 n0 d0", "p8 n4 d0", "p8 n4 d40", "p0 n4 d0", "p0 n4 d40"}; !slices.Equal(got, want) {
		t.Errorf("bench -p 8,0 -n 0,4 -d 0,40 rows %q, want %q", got, want)
	}
	if _, errOut, code = braid(t, "", "bench", "-m", model, "-d", "-1"); code == 0 || !strings.Contains(errOut, "-d") {
		t.Errorf("bench -d -1: exit %d, stderr %q; want a usage error naming -d", code, errOut)
	}
	if _, errOut, code = braid(t, "", "bench", "-m", model, "-np", "0"); code == 0 || !strings.Contains(errOut, "-np") {
		t.Errorf("bench -np 0: exit %d, stderr %q; want a usage error naming -np", code, errOut)
	}
}
