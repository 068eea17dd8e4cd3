package discover

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzOrdinal: any name either has an ordinal that reads back from the
// first label, or an error that names it; never a panic.
func FuzzOrdinal(f *testing.F) {
	for _, s := range []string{"bw-0.braid.test.", "w-12", "x", "-1", "a-", "a-01", "a--1.b", "é-3", "a-9999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		set, n, err := Ordinal(name)
		if err != nil {
			if !strings.Contains(err.Error(), "ordinal") || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) && !strings.Contains(err.Error(), fmt.Sprintf("%q", strings.TrimSuffix(name, "."))) {
				t.Errorf("error %q does not name %q and what is wrong", err, name)
			}
			return
		}
		first, _, _ := strings.Cut(strings.TrimSuffix(name, "."), ".")
		if n < 0 || set == "" || !strings.HasPrefix(first, set+"-") {
			t.Errorf("Ordinal(%q) = %q %d", name, set, n)
		}
	})
}

// FuzzLWS: any environment is read without a panic; when the leader's
// workers come out, there are size-1 of them, each a host:port whose first
// label is the leader's with -i appended.
func FuzzLWS(f *testing.F) {
	f.Add("braid-0.braid.default", "3", "0", 7000)
	f.Add("a", "2", "", 1)
	f.Add("", "1", "0", 7000)
	f.Add("x.y", "99999", "5", 0)
	f.Fuzz(func(t *testing.T, leader, size, index string, port int) {
		m := map[string]string{EnvLeader: leader, EnvSize: size}
		if index != "" {
			m[EnvIndex] = index
		}
		l, ok, err := ReadLWS(env(m))
		if !ok {
			t.Fatal("LWS_GROUP_SIZE set but not seen")
		}
		if err != nil {
			if !strings.Contains(err.Error(), "LWS_") {
				t.Errorf("error %q names no variable", err)
			}
			return
		}
		if l.Size > 64 {
			return // the loop below would only repeat itself
		}
		ws, err := l.Workers(port)
		if err != nil {
			return
		}
		if l.Size > 1 && len(ws) != l.Size-1 {
			t.Errorf("%d workers for a group of %d", len(ws), l.Size)
		}
		first, _, _ := strings.Cut(l.Leader, ".")
		for i, w := range ws {
			if !strings.HasPrefix(w, first+"-") {
				t.Errorf("worker %d at %q, leader %q", i+1, w, l.Leader)
			}
		}
	})
}

// FuzzParseMode: any --discover value parses to a mode that prints back
// to an equivalent value, or fails naming it.
func FuzzParseMode(f *testing.F) {
	for _, s := range []string{"lws", "none", "dns:a.b", "dns:", "dns:a..b", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMode(s)
		if err != nil {
			return
		}
		m2, err := ParseMode(m.String())
		if err != nil || m2 != m {
			t.Errorf("ParseMode(%q) = %v, which reads back as %v %v", s, m, m2, err)
		}
	})
}
