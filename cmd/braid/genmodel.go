package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"braid/internal/modelgen"
	"braid/internal/sysinfo"
)

func init() {
	register("genmodel", "write a random-weight model of a real shape (for benchmarks)", runGenModel)
}

func runGenModel(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("genmodel", "--preset NAME | --variant NAME [--type Q4_K_M|MXFP4_MOE|Q8_0|F16|...] [--nextn N] --out FILE.gguf [--seed S]", stderr)
	preset := fs.String("preset", "llama-1b", "model shape: "+strings.Join(modelgen.PresetNames(), ", "))
	variant := fs.String("variant", "", "instead of a preset, a small reference variant whose llama.cpp logits braid's tests keep, with its own seed: "+
		strings.Join(append(modelgen.VariantNames(), modelgen.EncoderVariantNames()...), ", "))
	typ := fs.String("type", "", "weight format or mix ("+strings.Join(modelgen.Mixes, ", ")+
		" or a tensor type); default MXFP4_MOE for gpt-oss presets, Q4_K_M for the other presets, F32 for variants")
	out := fs.String("out", "", "output file")
	seed := fs.Uint64("seed", 1, "random seed")
	nextn := fs.Int("nextn", -1, "NextN (MTP) blocks after the trunk, for --spec mtp (glm4moe, qwen35 and qwen35moe presets); default: the preset's")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usagef("--out FILE is required")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var cfg modelgen.Config
	shape := *preset
	if *variant != "" {
		// A variant is one file exactly, its seed part of it (reference
		// logits were made from that file).
		if set["preset"] || set["seed"] || set["nextn"] {
			return usagef("--variant %s: --preset, --seed and --nextn do not apply (a variant is a fixed file)", *variant)
		}
		_, dec := modelgen.Variants[*variant]
		_, enc := modelgen.EncoderVariants[*variant]
		if !dec && !enc {
			return usagef("--variant %q: known variants are %s", *variant, strings.Join(append(modelgen.VariantNames(), modelgen.EncoderVariantNames()...), ", "))
		}
		if *typ == "" {
			*typ = "F32"
		}
		c, err := modelgen.Variant(*variant, *typ)
		if err != nil {
			return usagef("--type: %v", err)
		}
		cfg, shape = c, *variant
	} else {
		c, ok := modelgen.Presets[*preset]
		if !ok {
			return usagef("--preset %q: known presets are %s", *preset, strings.Join(modelgen.PresetNames(), ", "))
		}
		if *typ == "" {
			*typ = modelgen.DefaultMix(c)
		}
		t, rule, err := modelgen.Mix(*typ)
		if err != nil {
			return usagef("--type: %v", err)
		}
		c.Type, c.TypeFor, c.Seed = t, rule, *seed
		if *nextn >= 0 {
			c.NextN = *nextn
		}
		c.Name = fmt.Sprintf("braid-random %s %s", *preset, *typ)
		cfg = c
	}
	f, err := modelgen.Plan(cfg)
	if err != nil {
		return fmt.Errorf("%s --type %s: %w", shape, *typ, err)
	}
	if err := checkFreeSpace(filepath.Dir(*out), f.Size()); err != nil {
		return err
	}
	start := time.Now()
	p := newWriteProgress(stderr, *out, isTerminal(stderr))
	err = f.WriteFile(*out, p.update)
	p.end()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%s, %s, %s) in %.1fs\n", *out, shape, *typ,
		sysinfo.FormatBytes(uint64(f.Size())), time.Since(start).Seconds())
	return nil
}

// checkFreeSpace refuses to start a file of size bytes in dir when the
// file system has less room: a 12 GB model that fails near its end has
// cost minutes and, until it is removed, the disk.
func checkFreeSpace(dir string, size int64) error {
	free, ok, err := freeSpace(dir)
	if err != nil {
		return fmt.Errorf("checking free space in %s: %w", dir, err)
	}
	if ok && uint64(size) > free {
		return fmt.Errorf("the model takes %s (%d bytes), but %s has only %s (%d bytes) free",
			sysinfo.FormatBytes(uint64(size)), size, dir, sysinfo.FormatBytes(free), free)
	}
	return nil
}

// writeProgress shows how far the writing of a model got: on a terminal
// one line redrawn in place a few times a second, elsewhere (a log) a
// line every progressLogEvery. A file written faster than that shows
// nothing.
type writeProgress struct {
	w       io.Writer
	name    string
	tty     bool
	every   time.Duration
	now     func() time.Time
	start   time.Time
	last    time.Time
	lastLen int
	shown   bool
}

const (
	progressTTYEvery = 250 * time.Millisecond
	progressLogEvery = 10 * time.Second
)

func newWriteProgress(w io.Writer, name string, tty bool) *writeProgress {
	p := &writeProgress{w: w, name: name, tty: tty, every: progressLogEvery, now: time.Now}
	if tty {
		p.every = progressTTYEvery
	}
	p.start = p.now()
	p.last = p.start
	return p
}

// update is modelgen's progress callback.
func (p *writeProgress) update(done, total int64) {
	now := p.now()
	last := done == total
	if now.Sub(p.last) < p.every && !(last && p.shown) {
		return
	}
	p.last = now
	elapsed := now.Sub(p.start).Seconds()
	line := fmt.Sprintf("writing %s: %3.0f%%, %s of %s", p.name, 100*float64(done)/float64(max(total, 1)),
		sysinfo.FormatBytes(uint64(done)), sysinfo.FormatBytes(uint64(total)))
	if elapsed > 0 && done > 0 {
		rate := float64(done) / elapsed
		line += fmt.Sprintf(", %s/s", sysinfo.FormatBytes(uint64(rate)))
		if last {
			// The kernel still holds much of the file in its cache; the
			// sync before the rename waits for the disk.
			line += ", syncing to disk"
		} else {
			eta := time.Duration(float64(total-done) / rate * float64(time.Second))
			line += ", ETA " + eta.Round(time.Second).String()
		}
	}
	p.show(line)
}

func (p *writeProgress) show(line string) {
	if !p.tty {
		fmt.Fprintln(p.w, line)
		p.shown = true
		return
	}
	// Spaces wipe what a longer previous line left.
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", max(0, p.lastLen-len(line))))
	p.lastLen = len(line)
	p.shown = true
}

// end closes the redrawn line, so that what follows starts on its own.
func (p *writeProgress) end() {
	if p.tty && p.shown {
		fmt.Fprintln(p.w)
	}
}
