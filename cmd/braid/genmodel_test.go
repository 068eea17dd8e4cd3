package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/internal/gguf"
	"braid/internal/modelgen"
)

func TestGenModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	var o, e bytes.Buffer
	if err := runGenModel([]string{"--preset", "tiny", "--type", "Q8_0", "--out", path}, &o, &e); err != nil {
		t.Fatalf("%v\n%s", err, e.String())
	}
	if !strings.Contains(o.String(), "wrote "+path) {
		t.Errorf("output %q", o.String())
	}
	m, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if tt, ok := m.Tensor("blk.3.ffn_down.weight"); !ok || tt.Type.String() != "Q8_0" {
		t.Errorf("blk.3.ffn_down.weight: %v", tt)
	}
}

// TestGenModelRefusals: a file type the shape cannot hold and a disk
// without room are refused before anything is written.
func TestGenModelRefusals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "big.gguf")
	var o, e bytes.Buffer
	err := runGenModel([]string{"--preset", "gpt-oss-20b", "--type", "Q4_K_M", "--out", path}, &o, &e)
	if err == nil || !strings.Contains(err.Error(), "2880") {
		t.Errorf("gpt-oss-20b as Q4_K_M: error %v, want one naming the 2880-value rows", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left: %v", ents)
	}
	err = runGenModel([]string{"--preset", "tiny", "--nextn", "1", "--out", path}, &o, &e)
	if err == nil || !strings.Contains(err.Error(), "NextN") {
		t.Errorf("tiny (llama) with --nextn 1: error %v, want one saying NextN blocks are not written for llama", err)
	}

	if err := checkFreeSpace(dir, 1<<20); err != nil {
		t.Errorf("1 MiB: %v", err)
	}
	free, ok, err := freeSpace(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("no free-space check on this system")
	}
	err = checkFreeSpace(dir, math.MaxInt64)
	if err == nil || !strings.Contains(err.Error(), "9223372036854775807 bytes") || !strings.Contains(err.Error(), dir) {
		t.Errorf("a file larger than the disk: error %v, want one with both sizes and the directory", err)
	}
	t.Logf("%d bytes free in %s: %v", free, dir, err)
}

// fakeClock advances by step at each reading.
type fakeClock struct {
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time { c.t = c.t.Add(c.step); return c.t }

func TestWriteProgress(t *testing.T) {
	const total = 1000 << 20
	run := func(tty bool, step time.Duration, updates int) string {
		var b bytes.Buffer
		p := newWriteProgress(&b, "m.gguf", tty)
		c := &fakeClock{t: time.Unix(0, 0), step: step}
		p.now, p.start, p.last = c.now, c.t, c.t
		for i := 1; i <= updates; i++ {
			p.update(int64(i)*total/int64(updates), total)
		}
		p.end()
		return b.String()
	}

	// A log gets a line every 10 s (here every 20 updates of 0.5 s), with
	// rate and ETA, and the last one says the data is being synced.
	log := run(false, 500*time.Millisecond, 100)
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	if len(lines) != 5 || strings.Contains(log, "\r") {
		t.Fatalf("log output, want 5 lines without \\r:\n%s", log)
	}
	if want := "writing m.gguf:  20%, 200.00 MiB of 1000.00 MiB, 20.00 MiB/s, ETA 40s"; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	if !strings.HasPrefix(lines[4], "writing m.gguf: 100%") || !strings.HasSuffix(lines[4], "syncing to disk") {
		t.Errorf("last line %q", lines[4])
	}

	// A terminal gets one line redrawn with \r, ended by a newline.
	tty := run(true, 100*time.Millisecond, 100)
	if strings.Count(tty, "\n") != 1 || !strings.HasSuffix(tty, "\n") || strings.Count(tty, "\r") < 30 {
		t.Errorf("terminal output: %q", tty)
	}
	if !strings.Contains(tty, "ETA 1s") || !strings.Contains(tty, "syncing to disk") {
		t.Errorf("terminal output lacks the ETA or the sync: %q", tty)
	}

	// A quick write shows nothing at all.
	if quick := run(true, time.Millisecond, 100); quick != "" {
		t.Errorf("a 0.1 s write printed %q", quick)
	}
}

// TestGenModelVariant: --variant writes the reference variant byte for
// byte as modelgen.Variant describes it (the file the committed llama.cpp
// logits came from), and refuses the flags that would change it and names
// it does not know.
func TestGenModelVariant(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "v.gguf")
	var o, e bytes.Buffer
	if err := runGenModel([]string{"--variant", "qwen35-hv", "--type", "Q8_0", "--out", path}, &o, &e); err != nil {
		t.Fatalf("%v\n%s", err, e.String())
	}
	cfg, err := modelgen.Variant("qwen35-hv", "Q8_0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := modelgen.Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if _, err := f.WriteTo(&want); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("genmodel --variant wrote %d bytes unlike modelgen.Variant's %d", len(got), want.Len())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--variant", "qwen35-hv", "--seed", "7"}, "do not apply"},
		{[]string{"--variant", "qwen35-hv", "--preset", "tiny"}, "do not apply"},
		{[]string{"--variant", "no-such"}, "known variants"},
		{[]string{"--variant", "qwen35-hv", "--type", "Q9_9"}, "Q9_9"},
	} {
		err := runGenModel(append(tc.args, "--out", filepath.Join(dir, "x.gguf")), &o, &e)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestEncoderRefusedByGenerators: braid genmodel --variant writes an
// encoder, and run, chat, bench and a clustered serve refuse it naming
// what it is and where it runs.
func TestEncoderRefusedByGenerators(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bert.gguf")
	if _, stderr, code := braid(t, "", "genmodel", "--variant", "bert-mean", "--out", path); code != 0 {
		t.Fatalf("genmodel --variant bert-mean: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{
		{"run", "-m", path, "-p", "hi", "-n", "1"},
		{"chat", "-m", path},
		{"bench", "-m", path, "-p", "8", "-n", "2", "-r", "1"},
		{"serve", "-m", path, "--workers", "127.0.0.1:1"},
	} {
		_, stderr, code := braid(t, "", args...)
		if code == 0 || !strings.Contains(stderr, "encoder") {
			t.Errorf("braid %s: exit %d, stderr %q: want a refusal naming the encoder", strings.Join(args, " "), code, stderr)
		}
	}
}
