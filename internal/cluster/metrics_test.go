package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"braid/internal/engine"
	"braid/internal/sample"
	"braid/internal/server"
	"braid/internal/tokenizer"
)

// TestMetricsDuringReform scrapes /metrics (the server's own handler over a
// cluster backend) and the cluster's frame counters without pause while a
// worker dies, a request fails, the worker comes back and the cluster
// re-forms. A re-form closes the sessions and empties rank 0's KV cache on
// the scheduler's goroutine, so under -race this checks that the scrapes
// read only what that goroutine publishes. It also checks that the re-form
// kept rank 0's cache (Reset, not a second pool beside the first) and that
// the frame counters never go back.
func TestMetricsDuringReform(t *testing.T) {
	path := sharedModel(t, faultModel)
	env := workerEnv(t)
	w := startWorker(t, "127.0.0.1:0", env)
	c := openCluster(t, path, "tensor", nil, w)
	cache := c.local.cache
	sched, err := engine.NewScheduler(c, engine.SchedulerConfig{Parallel: 1, Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(c.File())
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Model: "m"})
	srv.SetReady(&server.Backend{Sched: sched, Tok: tok, Vocab: c.Vocab(), Ranks: c})
	h := srv.Handler()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- sched.Run(ctx) }()
	defer func() { cancel(); <-ran }()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var scrapes int
	var last string
	wg.Add(1)
	go func() {
		defer wg.Done()
		var sent, recv uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("/metrics: status %d", rec.Code)
				return
			}
			last = rec.Body.String()
			wc := c.Counters()
			if len(wc) != 1 || wc[0].FramesSent < sent || wc[0].FramesReceived < recv {
				t.Errorf("frame counters went back: %+v after %d sent, %d received", wc, sent, recv)
				return
			}
			sent, recv = wc[0].FramesSent, wc[0].FramesReceived
			scrapes++
		}
	}()

	generate := func() engine.Result {
		p := sample.DefaultParams()
		p.Temperature = 0
		s, err := sample.New(p, c.Vocab())
		if err != nil {
			t.Fatal(err)
		}
		st, err := sched.Submit(context.Background(), engine.Job{Prompt: testPrompt, MaxTokens: 8, Sampler: s, TopLogprobs: -1})
		if err != nil {
			t.Fatal(err)
		}
		for done := false; !done; {
			if _, done, err = st.Recv(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
		}
		return st.Result()
	}
	if r := generate(); r.Err != nil {
		t.Fatalf("before the failure: %v", r.Err)
	}
	w.kill()
	if r := generate(); r.Err == nil {
		t.Fatal("a request with the worker killed succeeded")
	}
	w.restart()
	if r := generate(); r.Err != nil || r.GenTokens != 8 {
		t.Fatalf("after the worker came back: %d tokens, %v\nworker log:\n%s", r.GenTokens, r.Err, w.stderr())
	}
	close(stop)
	wg.Wait()
	if c.Reforms() == 0 {
		t.Error("the cluster did not re-form")
	}
	if c.local.cache != cache {
		t.Error("the re-form replaced rank 0's KV cache instead of emptying it: twice the KV memory while both were live")
	}
	t.Logf("%d scrapes during the run", scrapes)
	if want := "braid_kv_cache_blocks_total " + strconv.Itoa(cache.Config().Blocks); !strings.Contains(last, want+"\n") {
		t.Errorf("the last scrape lacks %q:\n%s", want, last)
	}
}
