package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"braid/internal/sysinfo"
)

// cpusUsage is --cpus's help.
const cpusUsage = "run on these CPUs only, a list like 5-9,15-19 (-t then defaults to their number); " +
	"default: on a CPU with big and little cores, the big ones in this process's affinity mask (braid doctor lists the classes)"

// localCores are this node's core classes, read once.
var localCores = sync.OnceValue(sysinfo.LocalCores)

// defaultThreads is the number of cores this process should compute on:
// on a CPU with big and little cores the big ones in its affinity mask
// (an even split of work waits for the slowest thread, and a little core
// is a third slower or worse), else every CPU it may use.
func defaultThreads() int {
	if c := localCores(); c.Hybrid() {
		return len(c.Fast())
	}
	return runtime.NumCPU()
}

// threadsFlag is -t: a thread count that remembers whether it was given,
// so that --cpus can set the default.
type threadsFlag struct {
	n   *int
	set *bool
}

func (f threadsFlag) String() string {
	if f.n == nil {
		return ""
	}
	return strconv.Itoa(*f.n)
}

func (f threadsFlag) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a number of threads", s)
	}
	*f.n, *f.set = v, true
	return nil
}

// given says whether any of names was set on the command line.
func given(fs *flag.FlagSet, names ...string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || slices.Contains(names, f.Name) })
	return set
}

// placeThreads decides where the compute threads run and pins the whole
// process there: --cpus LIST (threads defaults to its size when -t was
// not given), else, on a CPU with big and little cores, the big cores when
// the threads fit on them. It returns the line that says so ("" when
// nothing was pinned) and the CPUs pinned to (nil: all).
func placeThreads(list string, threads *int, tGiven bool) (string, []int, error) {
	return placeOn(localCores(), pin, list, threads, tGiven)
}

// placeOn is placeThreads on the given cores, pinning with pin.
func placeOn(cores sysinfo.Cores, pin func([]int) error, list string, threads *int, tGiven bool) (string, []int, error) {
	if list != "" {
		cpus, err := sysinfo.ParseCPUList(list)
		if err != nil {
			return "", nil, usagef("--cpus: %v", err)
		}
		var outside []int
		for _, cpu := range cpus {
			if !slices.Contains(cores.Allowed, cpu) {
				outside = append(outside, cpu)
			}
		}
		if len(outside) > 0 {
			return "", nil, usagef("--cpus %s: CPUs %s are not in this process's affinity mask (%s)", list, sysinfo.FormatCPUList(outside), sysinfo.FormatCPUList(cores.Allowed))
		}
		if !tGiven {
			*threads = len(cpus)
		}
		if err := pin(cpus); err != nil {
			return "", nil, err
		}
		line := fmt.Sprintf("braid: cpus %s (--cpus), %d threads", sysinfo.FormatCPUList(cpus), *threads)
		if *threads > len(cpus) {
			line += "; more threads than CPUs: they take turns"
		}
		return line, cpus, nil
	}
	if !cores.Hybrid() {
		return "", nil, nil
	}
	fast, slow := cores.Classes[0], cores.Classes[1:]
	var rest []int
	for _, cl := range slow {
		rest = append(rest, cl.CPUs...)
	}
	if *threads > len(fast.CPUs) {
		return fmt.Sprintf("braid: -t %d is more than the %d big cores (%s): threads run on all %d CPUs, the little ones (%s) too",
			*threads, len(fast.CPUs), sysinfo.FormatCPUList(fast.CPUs), len(cores.Allowed), sysinfo.FormatCPUList(rest)), nil, nil
	}
	if err := pin(fast.CPUs); err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("braid: cpus %s, the big cores (%s by %s; the little ones, %s, left out; --cpus LIST overrides), %d threads",
		sysinfo.FormatCPUList(fast.CPUs), fast.Describe(), cores.By, sysinfo.FormatCPUList(rest), *threads), fast.CPUs, nil
}

// pin pins the process to cpus and keeps the Go runtime's processors to
// them (unless GOMAXPROCS is set): more would only take turns.
func pin(cpus []int) error {
	if err := sysinfo.Pin(cpus); err != nil {
		return fmt.Errorf("--cpus: %w", err)
	}
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) > len(cpus) {
		runtime.GOMAXPROCS(len(cpus))
	}
	return nil
}
