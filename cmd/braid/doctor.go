package main

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"

	"braid/internal/dist"
	"braid/internal/kernels"
	"braid/internal/quant"
	"braid/internal/sysinfo"
)

func init() {
	register("doctor", "print this node's CPU features, chosen kernels, memory and build", runDoctor)
}

func runDoctor(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("doctor", "[--tls-dir DIR] [--secret-file F]", stderr)
	tlsDir := fs.String("tls-dir", "", "the TLS directory this node's worker or serve is given (default: $BRAID_TLS_DIR): checked and described")
	secretFile := fs.String("secret-file", "", "the shared secret's file (default: $BRAID_SECRET): checked, never printed")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	writeDoctor(stdout)
	return writeNetwork(stdout, *tlsDir, *secretFile)
}

// writeNetwork says what protects this node's links to its peers: TLS or
// plain TCP, and whether a secret authenticates them. An unusable TLS
// directory or secret is printed and is the command's error.
func writeNetwork(w io.Writer, tlsDir, secretFile string) error {
	t, terr := dist.LoadTLSDir(tlsDir)
	if terr != nil {
		fmt.Fprintf(w, "network:  TLS directory unusable: %v\n", terr)
	} else {
		fmt.Fprintf(w, "network:  %s\n", t.Describe())
	}
	secret, serr := dist.LoadSecret(secretFile)
	switch {
	case serr != nil:
		fmt.Fprintf(w, "secret:   unusable: %v\n", serr)
	case secret != nil:
		fmt.Fprintf(w, "secret:   set (%d bytes): peers prove it in the handshake\n", len(secret))
	case t != nil:
		fmt.Fprintln(w, "secret:   none: peers are authenticated by the cluster CA")
	default:
		fmt.Fprintln(w, "secret:   none: only loopback peers are accepted")
	}
	return errors.Join(terr, serr)
}

// writeDoctor prints every choice braid made on this node, so nothing falls
// back silently: a kernel running generic code shows here as "generic".
func writeDoctor(w io.Writer) {
	b := sysinfo.ReadBuild()
	fmt.Fprintf(w, "build:    %s\n", b.Digest())
	fmt.Fprintf(w, "platform: %s/%s, %d logical CPUs\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	fmt.Fprintf(w, "cpu:      %s\n", strings.Join(kernels.Features(), " "))
	writeCores(w, localCores())
	if kernels.ForcedGeneric() {
		fmt.Fprintln(w, "kernels:  BRAID_KERNELS=generic: every kernel forced to the pure-Go reference")
	} else {
		fmt.Fprintln(w, "kernels:")
	}
	packed := map[quant.Type]kernels.PackedChoice{}
	for _, c := range kernels.PackedSelected() {
		packed[c.Type] = c
	}
	for _, c := range kernels.Selected() {
		line := fmt.Sprintf("  %-7s %-12s activations as %s", c.Type, c.Impl, c.Act)
		if p, ok := packed[c.Type]; ok {
			line += fmt.Sprintf("; weights repacked at load to %s (%s)", p.Layout, p.Impl)
		}
		line += "; prompts: " + c.Prompt
		fmt.Fprintln(w, line)
	}
	m, err := sysinfo.ReadMemory()
	if err != nil {
		fmt.Fprintf(w, "memory:   unknown (%v)\n", err)
		return
	}
	fmt.Fprintf(w, "memory:   %s available of %s (MemAvailable)\n", sysinfo.FormatBytes(m.Available), sysinfo.FormatBytes(m.Total))
	if m.CgroupLimit > 0 {
		fmt.Fprintf(w, "cgroup:   limit %s, in use %s\n", sysinfo.FormatBytes(m.CgroupLimit), sysinfo.FormatBytes(m.CgroupUsage))
	} else {
		fmt.Fprintln(w, "cgroup:   no memory limit")
	}
	fmt.Fprintf(w, "usable:   %s for model weights, KV cache and scratch\n", sysinfo.FormatBytes(m.Usable()))
	writeReclaim(w, sysinfo.ReadReclaim("/"))
}

// writeCores lists the core classes of the CPUs this process may use and
// which of them braid computes on by default.
func writeCores(w io.Writer, c sysinfo.Cores) {
	switch {
	case len(c.Classes) == 0:
		fmt.Fprintf(w, "cores:    not read here (Linux only): braid uses %d threads by default\n", defaultThreads())
		return
	case !c.Hybrid():
		by := ""
		if c.By != "" {
			by = ", by " + c.By
		}
		fmt.Fprintf(w, "cores:    one class (%s%s): braid uses all %d by default\n", c.Classes[0].Describe(), by, len(c.Allowed))
		return
	}
	fmt.Fprintf(w, "cores:    %d classes by %s, in this process's affinity mask (%s):\n", len(c.Classes), c.By, sysinfo.FormatCPUList(c.Allowed))
	for i, cl := range c.Classes {
		name := "little"
		if i == 0 {
			name = "big"
		}
		fmt.Fprintf(w, "  %-7s %s\n", name, cl.Describe())
	}
	fmt.Fprintf(w, "  default: %d threads pinned to the big cores %s (--cpus LIST and -t override)\n", len(c.Fast()), sysinfo.FormatCPUList(c.Fast()))
}

// writeReclaim says what the kernel takes back ahead of need and what it
// means for the weights (--load-mode).
func writeReclaim(w io.Writer, r sysinfo.Reclaim) {
	f := r.Findings()
	if len(f) == 0 {
		fmt.Fprintln(w, "reclaim:  no proactive reclaim, swap or cgroup limit found: --load-mode auto reads the weights into memory when they fit, mmap keeps them as well")
		return
	}
	fmt.Fprintln(w, "reclaim:")
	for _, line := range f {
		fmt.Fprintf(w, "  - %s\n", line)
	}
}
