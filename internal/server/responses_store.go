package server

// The Responses store: the conversations of recent responses made with
// store true, for previous_response_id and GET / DELETE
// /v1/responses/{id}. It lives in memory, bounded by a count (the oldest
// forgotten first) and an age; a restart forgets it.

import (
	"container/list"
	"fmt"
	"net/http"
	"sync"
	"time"

	"braid/internal/chat"
)

// The store's bounds when Config leaves them zero.
const (
	DefaultResponsesStore = 1024
	DefaultResponsesTTL   = time.Hour
)

// responseStore keeps stored responses, oldest first; an entry older than
// ttl is gone as if deleted.
type responseStore struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	now   func() time.Time // time.Now; tests move it
	order *list.List       // of *storedResponse, oldest first
	items map[string]*storedResponse
}

type storedResponse struct {
	id      string
	el      *list.Element
	expires time.Time
	msgs    []chat.Message // the conversation: input, then the reply
	resp    map[string]any // the response object, for GET
}

func newResponseStore(n int, ttl time.Duration) *responseStore {
	return &responseStore{max: n, ttl: ttl, now: time.Now, order: list.New(), items: map[string]*storedResponse{}}
}

// on says whether responses are kept at all.
func (st *responseStore) on() bool { return st.max > 0 }

// kept says what the store keeps, for a 404.
func (st *responseStore) kept() string {
	if !st.on() {
		return "this server keeps no responses (it was started with --responses-store 0)"
	}
	return fmt.Sprintf("it was never made here, was made with store false, was deleted, or is gone (kept: the last %d responses made with store true, each for %v: --responses-store, --responses-ttl)", st.max, st.ttl)
}

// expire drops the entries past their time; the caller holds mu.
func (st *responseStore) expire() {
	now := st.now()
	for e := st.order.Front(); e != nil; e = st.order.Front() {
		r := e.Value.(*storedResponse)
		if now.Before(r.expires) {
			return
		}
		st.order.Remove(e)
		delete(st.items, r.id)
	}
}

func (st *responseStore) put(id string, msgs []chat.Message, resp map[string]any) {
	if !st.on() {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expire()
	if old, ok := st.items[id]; ok {
		st.order.Remove(old.el)
	}
	r := &storedResponse{id: id, expires: st.now().Add(st.ttl), msgs: msgs, resp: resp}
	r.el = st.order.PushBack(r)
	st.items[id] = r
	for st.order.Len() > st.max {
		oldest := st.order.Front()
		st.order.Remove(oldest)
		delete(st.items, oldest.Value.(*storedResponse).id)
	}
}

func (st *responseStore) get(id string) (*storedResponse, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expire()
	r, ok := st.items[id]
	return r, ok
}

func (st *responseStore) remove(id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expire()
	r, ok := st.items[id]
	if ok {
		st.order.Remove(r.el)
		delete(st.items, id)
	}
	return ok
}

func (st *responseStore) len() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expire()
	return st.order.Len()
}

// extraState is the Server's state for the endpoints beyond chat and
// text completions.
type extraState struct {
	once  sync.Once
	store *responseStore
}

func (s *Server) responses() *responseStore {
	s.extra.once.Do(func() {
		n, ttl := s.cfg.ResponsesStore, s.cfg.ResponsesTTL
		switch {
		case n == 0:
			n = DefaultResponsesStore
		case n < 0:
			n = 0
		}
		if ttl <= 0 {
			ttl = DefaultResponsesTTL
		}
		s.extra.store = newResponseStore(n, ttl)
	})
	return s.extra.store
}

func (s *Server) handleResponseByID(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	switch r.Method {
	case http.MethodGet:
		if sr, ok := s.responses().get(id); ok {
			writeJSON(w, http.StatusOK, sr.resp)
			return
		}
	case http.MethodDelete:
		if s.responses().remove(id) {
			writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
			return
		}
	default:
		writeError(w, methodNotAllowed(r))
		return
	}
	writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
		Message: fmt.Sprintf("no stored response %q: %s", id, s.responses().kept())})
}
