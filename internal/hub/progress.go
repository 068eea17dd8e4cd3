package hub

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"braid/internal/sysinfo"
)

// Progress draws one download's progress on a writer (standard error):
// bytes done of the total, the rate over the last seconds, and the time
// left. On a terminal the line is redrawn in place five times a second;
// elsewhere a line is written every Every (default 10 s).
type Progress struct {
	w     io.Writer
	term  bool
	Every time.Duration

	done atomic.Int64

	mu      sync.Mutex
	name    string
	total   int64
	start   sample   // when the file began
	samples []sample // recent (time, done), for the rate
	stop    chan struct{}
	stopped chan struct{}
}

type sample struct {
	t time.Time
	n int64
}

// NewProgress draws on w; term says w is a terminal.
func NewProgress(w io.Writer, term bool) *Progress { return &Progress{w: w, term: term} }

// begin starts a file: total bytes, of which have are already there.
func (p *Progress) begin(name string, total, have int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.name, p.total = name, total
	p.done.Store(have)
	p.start = sample{time.Now(), have}
	p.samples = []sample{p.start}
	p.stop, p.stopped = make(chan struct{}), make(chan struct{})
	p.mu.Unlock()
	every := 200 * time.Millisecond
	if !p.term {
		every = p.Every
		if every <= 0 {
			every = 10 * time.Second
		}
	}
	go func() {
		defer close(p.stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw(false)
			}
		}
	}()
}

// add counts n more bytes written.
func (p *Progress) add(n int64) {
	if p != nil {
		p.done.Add(n)
	}
}

// end stops the file's line with a last one saying how it went.
func (p *Progress) end(err error) {
	if p == nil || p.stop == nil {
		return
	}
	close(p.stop)
	<-p.stopped
	p.stop = nil
	if err != nil {
		if p.term {
			fmt.Fprintln(p.w)
		}
		return
	}
	p.draw(true)
}

// line is the progress line now.
func (p *Progress) line(final bool) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	done := p.done.Load()
	p.samples = append(p.samples, sample{now, done})
	// The rate over the last 5 s (all of it for the final line).
	first := p.start
	if !final {
		for _, s := range p.samples {
			if now.Sub(s.t) <= 5*time.Second {
				first = s
				break
			}
		}
		for len(p.samples) > 2 && now.Sub(p.samples[0].t) > 10*time.Second {
			p.samples = p.samples[1:]
		}
	}
	rate := 0.0
	if dt := now.Sub(first.t).Seconds(); dt > 0 {
		rate = float64(done-first.n) / dt
	}
	var b strings.Builder
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(done) / float64(p.total)
	}
	fmt.Fprintf(&b, "%s %3.0f%% %s / %s", p.name, pct, sysinfo.FormatBytes(uint64(max(done, 0))), sysinfo.FormatBytes(uint64(max(p.total, 0))))
	if p.term && !final {
		const width = 24
		fill := min(int(pct/100*width), width)
		b.WriteString(" [" + strings.Repeat("=", fill) + strings.Repeat(" ", width-fill) + "]")
	}
	fmt.Fprintf(&b, " %s/s", sysinfo.FormatBytes(uint64(rate)))
	switch {
	case final:
		fmt.Fprintf(&b, " in %v", now.Sub(p.start.t).Round(100*time.Millisecond))
	case rate > 0:
		eta := time.Duration(float64(p.total-done) / rate * float64(time.Second))
		fmt.Fprintf(&b, " ETA %v", eta.Round(time.Second))
	default:
		b.WriteString(" ETA -")
	}
	return b.String()
}

func (p *Progress) draw(final bool) {
	s := p.line(final)
	if p.term {
		fmt.Fprintf(p.w, "\r%s\x1b[K", s)
		if final {
			fmt.Fprintln(p.w)
		}
		return
	}
	fmt.Fprintln(p.w, s)
}
