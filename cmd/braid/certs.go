package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"braid/internal/dist"
)

func init() {
	register("certs", "make the cluster CA and each node's TLS directory for --tls-dir", runCerts)
}

// nodeNameRE keeps a node's name usable as a directory name.
var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

func runCerts(args []string, stdout, stderr io.Writer) error {
	flags := newFlags("certs", "DIR NODE[:HOST,HOST...] [NODE...] [--days N] [--ca-days N] [--ca-name NAME]", stderr)
	days := flags.Int("days", 825, "validity of each node certificate, in days (at most the CA's)")
	caDays := flags.Int("ca-days", 3650, "validity of a new CA, in days")
	caName := flags.String("ca-name", "braid cluster CA", "common name of a new CA")
	pos, err := parseWords(flags, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("want the directory and at least one node name, e.g. braid certs ./pki spark0:10.0.1.1 spark1:10.0.1.2")
	}
	if *days < 1 || *caDays < 1 {
		return usagef("--days %d, --ca-days %d: want at least 1", *days, *caDays)
	}
	dir := pos[0]
	type node struct {
		name  string
		hosts []string
	}
	var nodes []node
	seen := map[string]bool{}
	for _, w := range pos[1:] {
		name, hosts, _ := strings.Cut(w, ":")
		if !nodeNameRE.MatchString(name) || name == "ca" {
			return usagef("node %q: a name is letters, digits, '.', '_' and '-' (not \"ca\"), as it names the node's directory", name)
		}
		if seen[name] {
			return usagef("node %q is named twice", name)
		}
		seen[name] = true
		n := node{name: name}
		if hosts != "" {
			for _, h := range strings.Split(hosts, ",") {
				if h = strings.TrimSpace(h); h == "" {
					return usagef("node %q: an empty host in %q", name, hosts)
				}
				n.hosts = append(n.hosts, h)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("%s exists; remove it to issue %s a new certificate", filepath.Join(dir, name), name)
		}
		nodes = append(nodes, n)
	}

	ca, err := dist.LoadCA(dir)
	switch {
	case err == nil:
		fmt.Fprintf(stdout, "using the CA in %s (%q, valid until %s)\n", dir, ca.Cert.Subject.CommonName, ca.Cert.NotAfter.UTC().Format("2006-01-02"))
	case errors.Is(err, fs.ErrNotExist) && !exists(filepath.Join(dir, dist.TLSCAFile)) && !exists(filepath.Join(dir, dist.TLSCAKeyFile)):
		if ca, err = dist.NewCA(*caName, time.Duration(*caDays)*24*time.Hour); err != nil {
			return err
		}
		if err := ca.WriteCA(dir); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "made a CA in %s: %s (certificate) and %s (its key: keep it here, never on the nodes)\n",
			dir, dist.TLSCAFile, dist.TLSCAKeyFile)
	default:
		return fmt.Errorf("the CA in %s: %w", dir, err)
	}
	for _, n := range nodes {
		cert, key, err := ca.Issue(n.name, n.hosts, time.Duration(*days)*24*time.Hour)
		if err != nil {
			return err
		}
		nd := filepath.Join(dir, n.name)
		if err := ca.WriteNodeDir(nd, cert, key); err != nil {
			return err
		}
		if _, err := dist.LoadTLS(nd); err != nil { // what --tls-dir will read
			return err
		}
		fmt.Fprintf(stdout, "node %s: %s (copy it to the node; start braid worker/serve there with --tls-dir)\n", n.name, nd)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
