// Package discover finds the workers of a braid cluster from what an
// orchestrator provides, instead of a hand-written --workers list:
//
//   - LeaderWorkerSet's environment (LWS_LEADER_ADDRESS, LWS_GROUP_SIZE,
//     LWS_WORKER_INDEX): worker i of a group is the pod named after the
//     leader's first label with "-i" appended, in the leader's domain.
//   - DNS: the SRV records _braid._tcp.NAME of a Kubernetes headless
//     Service (a port named "braid"), else its A/AAAA records with the
//     PTR name of each address.
//
// The rank order is always explicit, never the order DNS answers in: the
// LWS worker index, or the StatefulSet ordinal in the first label of each
// name (<set>-<N> is rank N+1; rank 0 is the coordinator). The pure parts
// (environment, names, ordinals) are separate from the lookups so that
// both can be tested, the lookups against dnstest's in-process server.
package discover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The LeaderWorkerSet environment variables.
const (
	EnvLeader = "LWS_LEADER_ADDRESS"
	EnvSize   = "LWS_GROUP_SIZE"
	EnvIndex  = "LWS_WORKER_INDEX"
)

// EnvDNSServer names a DNS server (HOST:PORT) that discovery and the
// connections to the names it finds use instead of the system's resolver:
// for tests and air-gapped setups.
const EnvDNSServer = "BRAID_DNS_SERVER"

// Mode is a --discover value.
type Mode struct {
	Kind string // "none", "lws" or "dns"
	Name string // dns: the name whose records list the workers
}

func (m Mode) String() string {
	if m.Kind == "dns" {
		return "dns:" + m.Name
	}
	return m.Kind
}

// ParseMode reads --discover: lws, dns:NAME or none.
func ParseMode(s string) (Mode, error) {
	switch {
	case s == "lws", s == "none":
		return Mode{Kind: s}, nil
	case strings.HasPrefix(s, "dns:"):
		name := strings.TrimSuffix(strings.TrimPrefix(s, "dns:"), ".")
		if err := checkName(name); err != nil {
			return Mode{}, fmt.Errorf("--discover %q: %w", s, err)
		}
		return Mode{Kind: "dns", Name: name}, nil
	}
	return Mode{}, fmt.Errorf("--discover %q: want lws, dns:NAME or none", s)
}

// checkName checks a DNS name: dot-separated labels of 1..63 letters,
// digits, '-' and '_', 253 characters at most.
func checkName(name string) error {
	if name == "" {
		return errors.New("empty DNS name")
	}
	if len(name) > 253 {
		return fmt.Errorf("DNS name of %d characters (at most 253)", len(name))
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("DNS name %q has a label of %d characters (1..63)", name, len(l))
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("DNS name %q has the character %q", name, r)
			}
		}
	}
	return nil
}

// LWS is what LeaderWorkerSet's environment says about this pod's group.
type LWS struct {
	Leader   string // LWS_LEADER_ADDRESS, e.g. braid-0.braid.default
	Size     int    // LWS_GROUP_SIZE: pods in the group, the leader included
	Index    int    // LWS_WORKER_INDEX: 0 for the leader
	HasIndex bool   // whether LWS_WORKER_INDEX was set
}

// ReadLWS reads the LeaderWorkerSet variables through getenv (os.LookupEnv).
// It reports false when LWS_GROUP_SIZE is not set (not under LWS). A value
// that is set but wrong is an error naming the variable and the value.
func ReadLWS(getenv func(string) (string, bool)) (LWS, bool, error) {
	var l LWS
	size, ok := getenv(EnvSize)
	if !ok {
		return l, false, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(size))
	if err != nil || n < 1 || n > 1<<16 {
		return l, true, fmt.Errorf("%s=%q: want the number of pods in the group, 1..65536", EnvSize, size)
	}
	l.Size = n
	if v, ok := getenv(EnvIndex); ok {
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || i < 0 {
			return l, true, fmt.Errorf("%s=%q: want a worker index 0..%d", EnvIndex, v, n-1)
		}
		if i >= n {
			return l, true, fmt.Errorf("%s=%d is not below %s=%d", EnvIndex, i, EnvSize, n)
		}
		l.Index, l.HasIndex = i, true
	}
	leader, _ := getenv(EnvLeader)
	l.Leader = strings.TrimSuffix(strings.TrimSpace(leader), ".")
	if l.Leader == "" {
		if n > 1 {
			return l, true, fmt.Errorf("%s is not set (LeaderWorkerSet sets it with %s=%d)", EnvLeader, EnvSize, n)
		}
		return l, true, nil
	}
	if err := checkName(l.Leader); err != nil {
		return l, true, fmt.Errorf("%s=%q: %w", EnvLeader, leader, err)
	}
	return l, true, nil
}

// Workers are the control addresses of the group's workers in rank order
// (worker index i is rank i), for the leader: worker i is at the leader
// address with "-i" appended to its first label (LeaderWorkerSet's pod
// hostnames), at port.
func (l LWS) Workers(port int) ([]string, error) {
	if l.HasIndex && l.Index != 0 {
		return nil, fmt.Errorf("%s=%d: this pod is worker %d of its group, not the leader; the coordinator (braid serve) runs in the leader pod, index 0, and the workers run braid worker", EnvIndex, l.Index, l.Index)
	}
	if err := checkPort(port); err != nil {
		return nil, err
	}
	if l.Size < 2 {
		return nil, nil
	}
	first, rest, _ := strings.Cut(l.Leader, ".")
	if first == "" {
		return nil, fmt.Errorf("%s=%q has no first label", EnvLeader, l.Leader)
	}
	out := make([]string, 0, l.Size-1)
	for i := 1; i < l.Size; i++ {
		host := first + "-" + strconv.Itoa(i)
		if rest != "" {
			host += "." + rest
		}
		if len(first)+1+len(strconv.Itoa(i)) > 63 {
			return nil, fmt.Errorf("%s=%q: worker %d's host name %q has a first label over 63 characters", EnvLeader, l.Leader, i, host)
		}
		out = append(out, net.JoinHostPort(host, strconv.Itoa(port)))
	}
	return out, nil
}

// CheckWorker checks the environment of a braid worker's pod: it must be a
// worker (index 1..size-1), not the leader.
func (l LWS) CheckWorker() error {
	if !l.HasIndex {
		return fmt.Errorf("%s is not set (LeaderWorkerSet sets it with %s)", EnvIndex, EnvSize)
	}
	if l.Index == 0 {
		return fmt.Errorf("%s=0 is the leader's index: under LeaderWorkerSet the leader pod runs braid serve and the worker pods (1..%d) run braid worker", EnvIndex, l.Size-1)
	}
	return nil
}

func checkPort(port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("worker port %d: want 1..65535", port)
	}
	return nil
}

// Ordinal reads the StatefulSet ordinal from the first label of a DNS name:
// "braid-worker-2.braid.default.svc.cluster.local." is ordinal 2 of the
// set "braid-worker". A name whose first label does not end in -N is an
// error that says so.
func Ordinal(name string) (set string, n int, err error) {
	first, _, _ := strings.Cut(strings.TrimSuffix(name, "."), ".")
	i := strings.LastIndexByte(first, '-')
	if i <= 0 || i == len(first)-1 {
		return "", 0, fmt.Errorf("%q has no StatefulSet ordinal: its first label %q does not end in -N", name, first)
	}
	digits := first[i+1:]
	for _, r := range digits {
		if r < '0' || r > '9' {
			return "", 0, fmt.Errorf("%q has no StatefulSet ordinal: its first label %q does not end in -N", name, first)
		}
	}
	if len(digits) > 1 && digits[0] == '0' || len(digits) > 6 {
		return "", 0, fmt.Errorf("%q: ordinal %q is not a StatefulSet ordinal (no leading zeros, at most 999999)", name, digits)
	}
	v, _ := strconv.Atoi(digits)
	return first[:i], v, nil
}

// Resolver is the part of *net.Resolver discovery uses.
type Resolver interface {
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
	LookupHost(ctx context.Context, host string) ([]string, error)
	LookupAddr(ctx context.Context, addr string) ([]string, error)
}

// NewResolver is a resolver that asks the DNS server at addr (HOST:PORT)
// only, over UDP (and TCP for long answers).
func NewResolver(addr string) (*net.Resolver, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("DNS server %q: want HOST:PORT: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return nil, fmt.Errorf("DNS server %q: port %q is not 1..65535", addr, port)
	}
	if host == "" {
		return nil, fmt.Errorf("DNS server %q: no host", addr)
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}, nil
}

// ResolverFromEnv is the resolver BRAID_DNS_SERVER names, or nil (the
// system's) when it is unset or empty.
func ResolverFromEnv(getenv func(string) (string, bool)) (*net.Resolver, string, error) {
	v, ok := getenv(EnvDNSServer)
	v = strings.TrimSpace(v)
	if !ok || v == "" {
		return nil, "", nil
	}
	r, err := NewResolver(v)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", EnvDNSServer, err)
	}
	return r, v, nil
}

// Worker is one worker found in DNS.
type Worker struct {
	Rank    int    // the ordinal + 1
	Addr    string // HOST:PORT to dial
	Name    string // the name the ordinal came from (SRV target or PTR name)
	Ordinal int
}

// Listing is what one DNS lookup found.
type Listing struct {
	Source  string   // "SRV _braid._tcp.NAME" or "A/AAAA NAME"
	Workers []Worker // in rank order
	Missing []int    // ordinals 0..want-1 not listed
}

// lookupError is a lookup that failed for a reason that waiting may cure
// (no records yet, a server that did not answer).
type lookupError struct{ err error }

func (e *lookupError) Error() string { return e.err.Error() }
func (e *lookupError) Unwrap() error { return e.err }

// Lookup makes one attempt to list want workers under name: the SRV
// records _braid._tcp.NAME when there are any, else the A/AAAA records of
// NAME (each address's PTR name giving its ordinal) at port. Names
// without an ordinal, two names with one ordinal, names of two sets and
// ordinals beyond want are errors; a lookup that failed, or found too few,
// is for Wait to try again.
func Lookup(ctx context.Context, r Resolver, name string, want, port int) (*Listing, error) {
	if want < 1 {
		return nil, fmt.Errorf("dns:%s: %d workers expected; give --ranks N (this node and N-1 workers), N >= 2", name, want)
	}
	_, srvs, serr := r.LookupSRV(ctx, "braid", "tcp", name)
	var found []Worker
	var source string
	if serr == nil && len(srvs) > 0 {
		source = "SRV _braid._tcp." + name
		for _, s := range srvs {
			target := strings.TrimSuffix(s.Target, ".")
			_, n, err := Ordinal(target)
			if err != nil {
				return nil, fmt.Errorf("dns:%s: SRV target %w", name, err)
			}
			found = append(found, Worker{Rank: n + 1, Ordinal: n, Name: target, Addr: net.JoinHostPort(target, strconv.Itoa(int(s.Port)))})
		}
	} else {
		if err := checkPort(port); err != nil {
			return nil, err
		}
		source = "A/AAAA " + name
		ips, err := r.LookupHost(ctx, name)
		if err != nil {
			why := err
			if serr != nil {
				why = fmt.Errorf("no SRV records (%v) and no addresses (%w)", serr, err)
			}
			return nil, &lookupError{fmt.Errorf("dns:%s: %w", name, why)}
		}
		for _, ip := range ips {
			names, err := r.LookupAddr(ctx, ip)
			if err != nil || len(names) == 0 {
				return nil, &lookupError{fmt.Errorf("dns:%s: address %s has no PTR name to read its StatefulSet ordinal from (%v)", name, ip, err)}
			}
			var w *Worker
			var first error
			for _, pn := range names {
				pn = strings.TrimSuffix(pn, ".")
				if _, n, err := Ordinal(pn); err == nil {
					w = &Worker{Rank: n + 1, Ordinal: n, Name: pn, Addr: net.JoinHostPort(ip, strconv.Itoa(port))}
					break
				} else if first == nil {
					first = err
				}
			}
			if w == nil {
				return nil, fmt.Errorf("dns:%s: address %s: PTR name %w", name, ip, first)
			}
			found = append(found, *w)
		}
	}
	return rank(name, source, found, want)
}

// rank orders the workers by ordinal and checks them: one set, no
// duplicate, none beyond want; it lists the ordinals still missing.
func rank(name, source string, found []Worker, want int) (*Listing, error) {
	// By ordinal; names break ties so that an error names the same two
	// whatever order DNS answered in.
	sort.Slice(found, func(i, j int) bool {
		if found[i].Ordinal != found[j].Ordinal {
			return found[i].Ordinal < found[j].Ordinal
		}
		return found[i].Name < found[j].Name
	})
	l := &Listing{Source: source}
	set := ""
	for i, w := range found {
		s, _, _ := Ordinal(w.Name)
		if i == 0 {
			set = s
		} else if s != set {
			return nil, fmt.Errorf("dns:%s: %s lists two StatefulSets, %q (%s) and %q (%s): give each its own Service", name, source, set, found[0].Name, s, w.Name)
		}
		if i > 0 && found[i-1].Ordinal == w.Ordinal {
			return nil, fmt.Errorf("dns:%s: %s lists ordinal %d twice: %s and %s", name, source, w.Ordinal, found[i-1].Name, w.Name)
		}
		if w.Ordinal >= want {
			return nil, fmt.Errorf("dns:%s: %s lists %s, ordinal %d, but --ranks %d expects workers with ordinals 0..%d", name, source, w.Name, w.Ordinal, want+1, want-1)
		}
	}
	have := make([]bool, want)
	for _, w := range found {
		have[w.Ordinal] = true
	}
	for i, ok := range have {
		if !ok {
			l.Missing = append(l.Missing, i)
		}
	}
	l.Workers = found
	return l, nil
}

// Wait looks up the workers until all want are listed, with exponential
// backoff (logged per attempt), for at most wait. It returns their
// addresses in rank order (ordinal 0 first, rank 1). Errors that waiting
// cannot cure end it at once.
func Wait(ctx context.Context, r Resolver, name string, want, port int, wait time.Duration, log *slog.Logger) ([]Worker, error) {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	backoff := 250 * time.Millisecond
	start := time.Now()
	var last error
	var lastList *Listing
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		l, err := Lookup(actx, r, name, want, port)
		acancel()
		if err != nil {
			var le *lookupError
			if !errors.As(err, &le) {
				return nil, err
			}
			last = err
		} else if len(l.Missing) == 0 {
			for _, w := range l.Workers {
				log.Info("discover: worker", "rank", w.Rank, "addr", w.Addr, "name", w.Name, "from", l.Source)
			}
			return l.Workers, nil
		} else {
			lastList, last = l, nil
		}
		if ctx.Err() != nil {
			return nil, waitError(name, want, time.Since(start), last, lastList)
		}
		wait := min(backoff, time.Until(deadline(ctx)))
		if last != nil {
			log.Info("discover: no workers listed yet; retrying", "name", name, "attempt", attempt, "err", last, "retry_in", wait.Round(time.Millisecond))
		} else {
			log.Info("discover: waiting for workers", "from", lastList.Source, "attempt", attempt, "listed", len(lastList.Workers),
				"want", want, "missing_ordinals", fmt.Sprint(lastList.Missing), "retry_in", wait.Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil, waitError(name, want, time.Since(start), last, lastList)
		case <-time.After(wait):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

func waitError(name string, want int, waited time.Duration, last error, l *Listing) error {
	if l == nil {
		return fmt.Errorf("dns:%s: no workers listed after %v: %v", name, waited.Round(time.Millisecond), last)
	}
	var listed []string
	for _, w := range l.Workers {
		listed = append(listed, fmt.Sprintf("%s (ordinal %d)", w.Name, w.Ordinal))
	}
	var miss []string
	for _, o := range l.Missing {
		miss = append(miss, fmt.Sprintf("%d (rank %d)", o, o+1))
	}
	err := fmt.Errorf("dns:%s: %d of %d workers listed after %v (%s): missing ordinal %s; listed: %s",
		name, len(l.Workers), want, waited.Round(time.Millisecond), l.Source, strings.Join(miss, ", "), strings.Join(listed, ", "))
	if last != nil {
		err = fmt.Errorf("%w; last lookup: %v", err, last)
	}
	return err
}
