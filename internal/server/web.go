package server

// The web page at /: a chat (streamed, reasoning shown apart) and a view
// of the cluster (GET /cluster for what each rank holds, /metrics for the
// live figures). Everything it needs is embedded in the binary; it loads
// nothing from elsewhere.

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"

	"braid/internal/sysinfo"
)

//go:embed web
var webFiles embed.FS

// ClusterInfo is what the ranks hold, from the plan made at load: the
// cluster view's static part.
type ClusterInfo struct {
	// Split is the split mode ("tensor=2,layer=1"; "none" on one node) and
	// SplitBy what sized it.
	Split   string     `json:"split"`
	SplitBy string     `json:"split_by"`
	Ranks   []RankInfo `json:"ranks"`
}

// RankInfo is one rank of the plan.
type RankInfo struct {
	Rank  int    `json:"rank"`
	Addr  string `json:"addr"` // "local" for this node
	Stage int    `json:"stage"`
	// Layers, Heads and KVHeads are half-open ranges [lo, hi); TPRank of
	// TPSize is the rank's place in its tensor-parallel group.
	Layers  [2]int `json:"layers"`
	Heads   [2]int `json:"heads"`
	KVHeads [2]int `json:"kv_heads"`
	TPRank  int    `json:"tp_rank"`
	TPSize  int    `json:"tp_size"`
	// Bytes the rank needs (weights, KV cache, scratch) and has (0:
	// unknown).
	Weights      int64 `json:"weights_bytes"`
	KV           int64 `json:"kv_bytes"`
	Scratch      int64 `json:"scratch_bytes"`
	MemAvailable int64 `json:"mem_available_bytes"`
}

// handleCluster is the cluster view's data: the plan, this node's memory
// now, and the scheduler's shape.
func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, methodNotAllowed(r))
		return
	}
	b, ok := s.ready(w)
	if !ok {
		return
	}
	info := ClusterInfo{Split: "none", SplitBy: "one node"}
	if b.Cluster != nil {
		info = *b.Cluster
		info.Ranks = append([]RankInfo(nil), b.Cluster.Ranks...)
	}
	if m, err := sysinfo.ReadMemory(); err == nil {
		for i := range info.Ranks {
			if info.Ranks[i].Rank == 0 {
				info.Ranks[i].MemAvailable = int64(m.Usable())
			}
		}
	}
	cfg := b.Sched.Config()
	kv := b.Sched.Counters()
	writeJSON(w, http.StatusOK, map[string]any{
		"model": s.cfg.Model, "ctx": cfg.Context, "parallel": cfg.Parallel, "kv_blocks_total": kv.KVBlocksTotal,
		"split": info.Split, "split_by": info.SplitBy, "ranks": nonNilRanks(info.Ranks), "time": time.Now().UnixMilli(),
		"embeddings": b.Embed != nil, "reasoning_format": b.reasoning.String(),
	})
}

func nonNilRanks(r []RankInfo) []RankInfo {
	if r == nil {
		return []RankInfo{}
	}
	return r
}

// handleWeb serves the page and its files. They are public (no key): the
// page asks for one when the API needs it.
func (s *Server) handleWeb(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "" {
		name = "index.html"
	}
	data, err := fs.ReadFile(webFiles, path.Join("web", path.Clean("/" + name)[1:]))
	if err != nil {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found", Message: "no file " + r.URL.Path})
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache")
	// The page loads nothing from elsewhere; say so to the browser.
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}
