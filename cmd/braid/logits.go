package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"braid/internal/engine"
	"braid/internal/model"
)

func init() {
	register("logits", "write the logits of every position of a token sequence", runLogits)
}

func runLogits(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("logits", "-m MODEL --tokens 1,2,3 --out FILE", stderr)
	var mf modelFlags
	mf.register(fs)
	var cf clusterFlags
	cf.register(fs)
	tokens := fs.String("tokens", "", "comma-separated token ids")
	out := fs.String("out", "", "output file: little-endian float32 [positions x vocabulary], row-major")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *tokens == "" || *out == "" {
		return usagef("--tokens and --out are required")
	}
	var ids []int32
	for i, s := range strings.Split(*tokens, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return usagef("--tokens: item %d %q is not a token id", i, s)
		}
		ids = append(ids, int32(v))
	}
	if mf.ctx == 0 {
		mf.ctx = len(ids)
	}
	if len(ids) > mf.ctx {
		return usagef("%d tokens do not fit the context of %d (-c)", len(ids), mf.ctx)
	}
	l, err := loadBackend(&mf, &cf, 1, stderr)
	if err != nil {
		return err
	}
	defer l.Close()
	var b model.Batch
	for i, id := range ids {
		b.Add(id, int32(i), 0, true)
	}
	V := l.backend.Vocab()
	logits := make([]float32, len(ids)*V)
	if err := l.backend.Forward(&b, engine.FullLogits, logits); err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	var buf [4]byte
	for _, v := range logits {
		binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
		w.Write(buf[:])
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	fmt.Fprintf(stdout, "wrote %s: %d positions x %d vocabulary float32\n", *out, len(ids), V)
	return nil
}
