// Command braid runs GGUF language models on one machine or split across
// several. One binary, the same on every node; the first argument names what
// to do.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand: its one-line summary and its entry point, which
// gets the arguments after the subcommand's name.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(name, summary string, run func([]string, io.Writer, io.Writer) error) {
	commands[name] = command{summary, run}
}

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain is main without the exit, so tests can drive the CLI in-process.
func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "-v") {
		fmt.Fprint(stdout, versionText())
		return 0
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if err := checkEnv(); err != nil {
		fmt.Fprintf(stderr, "braid: %v\n", err)
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "braid: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "braid %s: %v\n", args[0], err)
			return 2
		}
		fmt.Fprintf(stderr, "braid %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: braid <command> [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'braid <command> -h' for a command's flags.")
}

// usageError marks a mistake in the command line (exit status 2).
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// parseInterspersed parses flags that may come before, between or after the
// positional arguments (`braid inspect MODEL --tensor X`), as users of
// llama.cpp's tools expect; "--" ends the flags.
//
// It also gives the flags their llama.cpp long names (addLongNames) and
// refuses positional words where the command takes none (noArgs).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	addLongNames(fs)
	pos, err := parseWords(fs, args)
	if err != nil {
		return nil, err
	}
	if err := noArgs(fs, pos); err != nil {
		return nil, err
	}
	return pos, nil
}

func parseWords(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err}
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// newFlags makes a FlagSet whose usage text goes to w and names the command.
func newFlags(name, synopsis string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("braid "+name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "usage: braid %s %s\n", name, synopsis)
		printFlags(w, fs)
	}
	return fs
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix) + "\n"
}
