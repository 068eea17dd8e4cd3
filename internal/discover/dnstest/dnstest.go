// Package dnstest is a tiny in-process DNS server for tests of discovery:
// it answers A, AAAA, SRV and PTR questions over UDP on a loopback port
// from records the test sets (and may change while it runs), so that a
// net.Resolver pointed at it (discover.NewResolver, or BRAID_DNS_SERVER in
// a child process) sees a Kubernetes headless Service without any network.
// It is for tests only; the messages are encoded with x/net's dnsmessage.
package dnstest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/net/dns/dnsmessage"
)

// SRV is one SRV record's target and port.
type SRV struct {
	Target string
	Port   uint16
}

// Server answers DNS questions on a loopback UDP port until Close.
type Server struct {
	pc      net.PacketConn
	done    chan struct{}
	queries atomic.Int64

	mu   sync.Mutex
	a    map[string][]netip.Addr // A and AAAA by name
	srv  map[string][]SRV        // by full name, _braid._tcp.NAME.
	ptr  map[string]string       // by reverse name
	drop bool                    // answer nothing (a server that times out)
}

// Start listens on 127.0.0.1, port 0, and answers until Close.
func Start() (*Server, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{pc: pc, done: make(chan struct{}), a: map[string][]netip.Addr{}, srv: map[string][]SRV{}, ptr: map[string]string{}}
	go s.serve()
	return s, nil
}

// Addr is the server's address, HOST:PORT.
func (s *Server) Addr() string { return s.pc.LocalAddr().String() }

// Queries counts the questions answered so far.
func (s *Server) Queries() int64 { return s.queries.Load() }

// Close stops the server and waits for its goroutine.
func (s *Server) Close() {
	s.pc.Close()
	<-s.done
}

func canon(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, ".")) + "."
}

// SetHost sets the A and AAAA records of name (replacing earlier ones; no
// addresses removes the name).
func (s *Server) SetHost(name string, addrs ...string) error {
	var as []netip.Addr
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return err
		}
		as = append(as, ip)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(as) == 0 {
		delete(s.a, canon(name))
	} else {
		s.a[canon(name)] = as
	}
	return nil
}

// SetSRV sets the SRV records of name (the full name, _braid._tcp.NAME),
// in the order given (the order the answers list them in).
func (s *Server) SetSRV(name string, recs ...SRV) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(recs) == 0 {
		delete(s.srv, canon(name))
		return
	}
	s.srv[canon(name)] = append([]SRV(nil), recs...)
}

// SetPTR sets the PTR record of ip to name.
func (s *Server) SetPTR(ip, name string) error {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ptr[reverse(a)] = canon(name)
	return nil
}

// SetSilent makes the server read questions and answer none (true) or
// answer again (false).
func (s *Server) SetSilent(v bool) {
	s.mu.Lock()
	s.drop = v
	s.mu.Unlock()
}

// reverse is ip's name under in-addr.arpa or ip6.arpa.
func reverse(ip netip.Addr) string {
	var b strings.Builder
	if ip.Is4() {
		v := ip.As4()
		for i := 3; i >= 0; i-- {
			fmt.Fprintf(&b, "%d.", v[i])
		}
		return b.String() + "in-addr.arpa."
	}
	v := ip.As16()
	for i := 15; i >= 0; i-- {
		fmt.Fprintf(&b, "%x.%x.", v[i]&0xf, v[i]>>4)
	}
	return b.String() + "ip6.arpa."
}

func (s *Server) serve() {
	defer close(s.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		resp, ok := s.answer(buf[:n])
		if !ok {
			continue
		}
		s.queries.Add(1)
		s.pc.WriteTo(resp, from)
	}
}

// answer builds the response to one query; false drops it (malformed, or
// the server is silent).
func (s *Server) answer(q []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil, false
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return nil, false
	}
	question := qs[0]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drop {
		return nil, false
	}
	name := strings.ToLower(question.Name.String())
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	_, isHost := s.a[name]
	_, isSRV := s.srv[name]
	_, isPTR := s.ptr[name]
	if !isHost && !isSRV && !isPTR {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(question) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	hdr := func(t dnsmessage.Type) dnsmessage.ResourceHeader {
		return dnsmessage.ResourceHeader{Name: question.Name, Type: t, Class: dnsmessage.ClassINET, TTL: 5}
	}
	mustName := func(n string) (dnsmessage.Name, bool) {
		v, err := dnsmessage.NewName(n)
		return v, err == nil
	}
	switch question.Type {
	case dnsmessage.TypeA:
		for _, ip := range s.a[name] {
			if ip.Is4() {
				if b.AResource(hdr(dnsmessage.TypeA), dnsmessage.AResource{A: ip.As4()}) != nil {
					return nil, false
				}
			}
		}
	case dnsmessage.TypeAAAA:
		for _, ip := range s.a[name] {
			if ip.Is6() && !ip.Is4In6() {
				if b.AAAAResource(hdr(dnsmessage.TypeAAAA), dnsmessage.AAAAResource{AAAA: ip.As16()}) != nil {
					return nil, false
				}
			}
		}
	case dnsmessage.TypeSRV:
		for _, r := range s.srv[name] {
			t, ok := mustName(canon(r.Target))
			if !ok || b.SRVResource(hdr(dnsmessage.TypeSRV), dnsmessage.SRVResource{Priority: 0, Weight: 10, Port: r.Port, Target: t}) != nil {
				return nil, false
			}
		}
	case dnsmessage.TypePTR:
		if n, ok := s.ptr[name]; ok {
			t, ok := mustName(n)
			if !ok || b.PTRResource(hdr(dnsmessage.TypePTR), dnsmessage.PTRResource{PTR: t}) != nil {
				return nil, false
			}
		}
	}
	out, err := b.Finish()
	return out, err == nil
}
