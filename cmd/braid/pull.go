package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"braid/internal/cluster"
	"braid/internal/gguf"
	"braid/internal/hub"
	"braid/internal/sysinfo"
)

func init() {
	register("pull", "download a model from the Hugging Face hub into the cache the Hugging Face tools share", runPull)
	register("ls", "list the GGUF models in the Hugging Face hub cache", runLs)
	register("rm", "remove a model (or a whole repository) from the Hugging Face hub cache", runRm)
}

func runPull(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("pull", "ORG/NAME[:QUANT|:FILE] [--revision R] [--connections N]", stderr)
	rev := fs.String("revision", "", "branch, tag or commit (default main; also ORG/NAME@REV)")
	conns := fs.Int("connections", 4, "ranged connections per file")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one model, ORG/NAME[:QUANT|:FILE], got %d arguments", len(pos))
	}
	if *conns < 1 || *conns > 64 {
		return usagef("--connections %d: want 1 to 64", *conns)
	}
	spec, err := hub.ParseSpec(pos[0])
	if err != nil {
		return usageError{err}
	}
	if *rev != "" {
		if spec.Revision != "" && spec.Revision != *rev {
			return usagef("revision %q in %s and --revision %q differ", spec.Revision, pos[0], *rev)
		}
		spec.Revision = *rev
		if _, err := hub.ParseSpec(spec.String()); err != nil {
			return usagef("--revision: %v", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m, err := pullModel(ctx, spec, *conns, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, m.Path())
	return nil
}

// pullModel fetches spec into the default cache, drawing progress on
// stderr, and says what it did.
func pullModel(ctx context.Context, spec hub.Spec, conns int, stderr io.Writer) (*hub.Model, error) {
	c := hub.NewClient()
	c.Connections = conns
	c.Progress = hub.NewProgress(stderr, isTerminal(stderr))
	c.Logf = func(format string, a ...any) { fmt.Fprintf(stderr, "braid: "+format+"\n", a...) }
	cache := hub.NewCache("")
	m, err := c.Pull(ctx, cache, spec)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("pull %s interrupted (run it again to resume): %w", spec, err)
		}
		return nil, fmt.Errorf("pull %s: %w", spec, err)
	}
	what := "already in the cache"
	if m.Downloaded > 0 {
		what = "downloaded " + sysinfo.FormatBytes(uint64(m.Downloaded))
	}
	fmt.Fprintf(stderr, "braid: %s (%s, %d file(s), commit %s): %s\n", m.Name(), sysinfo.FormatBytes(uint64(m.Size())), len(m.Files), m.Commit[:12], what)
	return m, nil
}

func runLs(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ls", "[--paths]", stderr)
	paths := fs.Bool("paths", false, "show each model's file path")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("braid ls takes no arguments")
	}
	cache := hub.NewCache("")
	models, err := cache.List()
	if err != nil {
		return fmt.Errorf("listing %s: %w", cache.Dir, err)
	}
	if len(models) == 0 {
		fmt.Fprintf(stderr, "no GGUF models in %s\n", cache.Dir)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "MODEL\tQUANT\tSIZE\tARCH\tREVISION")
	if *paths {
		fmt.Fprint(tw, "\tPATH")
	}
	fmt.Fprintln(tw)
	for _, m := range models {
		arch := "?"
		if f, err := gguf.Open(m.Path()); err == nil {
			if a, ok := f.String("general.architecture"); ok {
				arch = a
			}
			f.Close()
		}
		rev := m.Commit[:12]
		if len(m.Refs) > 0 {
			rev = strings.Join(m.Refs, ",") + " (" + rev + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s", m.Repo, m.Quant, sysinfo.FormatBytes(uint64(m.Size())), arch, rev)
		if *paths {
			fmt.Fprintf(tw, "\t%s", m.Path())
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func runRm(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("rm", "ORG/NAME[:QUANT|:FILE]   (without :QUANT the whole repository)", stderr)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one model, ORG/NAME[:QUANT|:FILE], got %d arguments", len(pos))
	}
	spec, err := hub.ParseSpec(pos[0])
	if err != nil {
		return usageError{err}
	}
	cache := hub.NewCache("")
	freed, err := cache.Remove(spec)
	if err != nil {
		return fmt.Errorf("rm %s: %w", spec, err)
	}
	fmt.Fprintf(stderr, "braid: removed %s from %s (%s freed)\n", spec, cache.Dir, sysinfo.FormatBytes(uint64(freed)))
	return nil
}

// pullFlag adds --pull to a command that opens a model.
func pullFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("pull", false, "with -m ORG/NAME:QUANT: download the model when the hub cache lacks it (never done silently)")
}

// looksLikeSpec says whether a -m value names a hub model rather than a
// file: it is not an existing path, parses as ORG/NAME[@REV][:QUANT|:FILE],
// and, without a colon, does not end in .gguf.
func looksLikeSpec(arg string) bool {
	if _, err := os.Stat(arg); err == nil {
		return false
	}
	if _, err := hub.ParseSpec(arg); err != nil {
		return false
	}
	return strings.Contains(arg, ":") || !strings.HasSuffix(strings.ToLower(arg), ".gguf")
}

// resolveModel turns a -m value naming a hub model into the path of its
// file in the hub cache, downloading it first only when pull is set. A
// file path is left as it is. The model found is returned (nil for a
// path).
func resolveModel(path *string, pull bool, stderr io.Writer) (*hub.Model, error) {
	if *path == "" || !looksLikeSpec(*path) {
		return nil, nil
	}
	spec, _ := hub.ParseSpec(*path)
	cache := hub.NewCache("")
	m, err := cache.Find(spec)
	if err != nil {
		if !errors.Is(err, hub.ErrNotCached) {
			return nil, fmt.Errorf("-m %s: %w", *path, err)
		}
		if !pull {
			return nil, fmt.Errorf("-m %s: no such file, and the model is not in the hub cache %s (%v); fetch it with `braid pull %s`, or add --pull",
				*path, cache.Dir, err, spec)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if m, err = pullModel(ctx, spec, 4, stderr); err != nil {
			return nil, err
		}
	}
	*path = m.Path()
	return m, nil
}

// resolve resolves -m (see resolveModel), once.
func (f *modelFlags) resolve(stderr io.Writer) error {
	m, err := resolveModel(&f.path, f.pull, stderr)
	if m != nil {
		f.hub = m
	}
	return err
}

// hubModel is the -m model's hub reference for the workers of a cluster
// (nil for a file path).
func (f *modelFlags) hubModel() *cluster.HubModel { return hubRef(f.hub) }

// hubRef is a hub model's reference for the workers (nil for a file).
func hubRef(m *hub.Model) *cluster.HubModel {
	if m == nil {
		return nil
	}
	h := &cluster.HubModel{Repo: m.Repo, Commit: m.Commit, Quant: m.Quant}
	for _, lf := range m.Files {
		h.Files = append(h.Files, lf.File)
	}
	return h
}
