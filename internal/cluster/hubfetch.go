package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"braid/internal/hub"
)

// HubModel names the cluster's model on a Hugging Face-compatible hub (a
// model given as -m ORG/NAME:QUANT). A worker without a copy at the
// coordinator's path looks for it in its own hub cache and, unless started
// with --no-pull, fetches it there itself with its own HF_ENDPOINT and
// HF_TOKEN (no credential travels), each file verified by its SHA-256; the
// first file's must be the model hash the coordinator computed. A worker
// that cannot fetch it falls back to receiving its shard from the
// coordinator.
type HubModel struct {
	Repo   string     `json:"repo"`
	Commit string     `json:"commit"`
	Quant  string     `json:"quant"`
	Files  []hub.File `json:"files"` // every part, in order
}

// maxHubFiles bounds the parts a load may name.
const maxHubFiles = 1024

// check refuses a hub reference that does not name the model sha.
func (h *HubModel) check(sha string) error {
	if _, err := hub.ParseSpec(h.Repo); err != nil {
		return err
	}
	if len(h.Files) == 0 || len(h.Files) > maxHubFiles {
		return fmt.Errorf("%s names %d files", h.Repo, len(h.Files))
	}
	if h.Files[0].SHA256 != sha {
		return fmt.Errorf("%s: %s has SHA-256 %s, the model loaded is %s", h.Repo, h.Files[0].Path, h.Files[0].SHA256, sha)
	}
	return nil // PullFiles checks the commit, paths and hashes
}

// inCache says whether every file's blob is in the cache.
func (h *HubModel) inCache(c hub.Cache) bool {
	for _, f := range h.Files {
		fi, err := os.Stat(c.BlobPath(h.Repo, f.SHA256))
		if err != nil || fi.Size() != f.Size {
			return false
		}
	}
	return true
}

// stageWriter turns progress lines into load stages the coordinator shows.
type stageWriter struct {
	stage  func(string)
	prefix string
}

func (s stageWriter) Write(p []byte) (int, error) {
	if l := strings.TrimSpace(string(p)); l != "" {
		s.stage(s.prefix + l)
	}
	return len(p), nil
}

// fromHub finds the model a load names by hub reference in this node's hub
// cache and, with pull (and the worker not started with --no-pull),
// fetches what is missing. It says where the model file is, or why not.
func (w *Worker) fromHub(m *loadMsg, pull bool, stage func(string)) (string, error) {
	h := m.Hub
	if h == nil {
		return "", fmt.Errorf("the coordinator named no hub model")
	}
	if err := h.check(m.SHA256); err != nil {
		return "", fmt.Errorf("hub reference refused: %w", err)
	}
	cache := hub.NewCache(w.cfg.HubCache)
	name := h.Repo + ":" + h.Quant
	if !h.inCache(cache) {
		if !pull {
			return "", fmt.Errorf("%s is not in the hub cache %s", name, cache.Dir)
		}
		if w.cfg.NoPull {
			return "", fmt.Errorf("%s is not in the hub cache %s, and this worker does not pull (--no-pull)", name, cache.Dir)
		}
	}
	c := hub.NewClient()
	c.Progress = hub.NewProgress(stageWriter{stage, "pulling " + name + " from the hub: "}, false)
	c.Progress.Every = time.Second
	c.Logf = func(format string, a ...any) { w.log.Info("worker: " + fmt.Sprintf(format, a...)) }
	stage("resolving " + name + " in the hub cache " + cache.Dir)
	mod, err := c.PullFiles(context.Background(), cache, h.Repo, "", h.Commit, h.Quant, h.Files)
	if err != nil {
		return "", fmt.Errorf("pulling %s: %w", name, err)
	}
	if mod.Downloaded > 0 {
		w.log.Info("worker: pulled the model from the hub", "model", name, "bytes", mod.Downloaded, "path", mod.Path())
	}
	return filepath.Clean(mod.Path()), nil
}

// hubProbeTimeout bounds the question a worker asks the hub for braid plan.
const hubProbeTimeout = 10 * time.Second

// hubSource says where the model m names by hub reference would come from
// at a load, as fromHub decides (pull: whether the load would pull): this
// node's hub cache, or a pull, when the worker may pull, its disk has
// room and the hub answers it for the model's commit (one request, no
// download). Otherwise it says why not.
func (w *Worker) hubSource(m *loadMsg, pull bool, stage func(string)) (*sourceMsg, string) {
	h := m.Hub
	if err := h.check(m.SHA256); err != nil {
		return nil, "the hub reference is refused: " + err.Error()
	}
	cache := hub.NewCache(w.cfg.HubCache)
	if h.inCache(cache) {
		return &sourceMsg{Action: SourceRead, From: fromHubCache, Path: cache.Dir}, ""
	}
	name := h.Repo + ":" + h.Quant
	notIn := fmt.Sprintf("%s is not in its hub cache %s", name, cache.Dir)
	switch {
	case !pull:
		return nil, notIn
	case w.cfg.NoPull:
		return nil, notIn + ", and it does not pull (--no-pull)"
	}
	c := hub.NewClient()
	c.Retries = -1 // one try: the load retries, this is a question
	need := c.Missing(cache, h.Repo, h.Files)
	if free, ok := cache.Free(); ok && free < need {
		return nil, fmt.Sprintf("%s, and its disk has %s free for a pull of %s", notIn, formatBytes(free), formatBytes(need))
	}
	endpoint := c.Endpoint
	if endpoint == "" {
		endpoint = hub.DefaultEndpoint
	}
	stage("asking the hub " + endpoint + " for " + name)
	ctx, cancel := context.WithTimeout(context.Background(), hubProbeTimeout)
	defer cancel()
	if _, err := c.Info(ctx, h.Repo, h.Commit); err != nil {
		return nil, fmt.Sprintf("%s, and the hub %s does not give it: %v", notIn, endpoint, err)
	}
	return &sourceMsg{Action: SourcePull, Path: cache.Dir, Pull: need, Endpoint: endpoint}, ""
}
