package server

// POST /v1/embeddings: the model's final hidden state (after the last norm,
// what the output head reads), averaged over the input's tokens and scaled
// to unit length, for any model braid runs. OpenAI's request shape: input
// as a string, a list of strings, a list of token ids or a list of lists.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/kvcache"
	"braid/internal/model"
)

// Embedder turns token sequences into vectors.
type Embedder interface {
	// Embed returns one vector per input, each Dim() long.
	Embed(ctx context.Context, inputs [][]int32) ([][]float32, error)
	Dim() int
	// MaxTokens is the longest input.
	MaxTokens() int
}

// ErrNoEmbeddings is an Embedder's error for a model set-up that cannot give
// hidden states (the server answers 501 with its text).
var ErrNoEmbeddings = errors.New("embeddings are not available")

// LocalEmbedder runs embeddings on this node with its own instance of the
// model: the weights are the same mapped file, the step buffers and a
// one-sequence KV cache its own (made at the first request), so the
// scheduler's model is never touched from another goroutine. Requests take
// turns.
type LocalEmbedder struct {
	file    *gguf.Model
	threads int
	ctx     int
	batch   int
	kvF32   bool

	mu    sync.Mutex
	m     *model.Model
	pool  *kernels.Pool
	cache *kvcache.Cache
	err   error
}

// NewLocalEmbedder makes an embedder for the model in f with inputs of up to
// ctx tokens, evaluated batch tokens at a time on threads threads.
func NewLocalEmbedder(f *gguf.Model, threads, ctx, batch int, kvF32 bool) *LocalEmbedder {
	return &LocalEmbedder{file: f, threads: max(threads, 1), ctx: ctx, batch: min(max(batch, 1), 64), kvF32: kvF32}
}

func (e *LocalEmbedder) load() error {
	if e.m != nil || e.err != nil {
		return e.err
	}
	pool := kernels.NewPool(e.threads)
	m, err := model.New(e.file, pool, model.Options{MaxBatch: e.batch})
	if err != nil {
		pool.Close()
		e.err = err
		return err
	}
	cache, err := m.NewCache(model.CacheSize{Positions: e.ctx, Ctx: e.ctx, F32: e.kvF32})
	if err != nil {
		pool.Close()
		e.err = err
		return err
	}
	e.m, e.pool, e.cache = m, pool, cache
	return nil
}

// Dim is the embedding width.
func (e *LocalEmbedder) Dim() int {
	c, err := model.ReadConfig(e.file)
	if err != nil {
		return 0
	}
	return c.Embd
}

// MaxTokens is the longest input.
func (e *LocalEmbedder) MaxTokens() int { return e.ctx }

// Embed runs each input as one sequence, every position an output, and
// mean-pools the final-normed hidden states.
func (e *LocalEmbedder) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.load(); err != nil {
		return nil, err
	}
	E, V := e.m.Cfg.Embd, e.m.Cfg.Vocab
	logits := make([]float32, e.batch*V)
	hidden := make([]float32, e.batch*E)
	out := make([][]float32, len(inputs))
	var b model.Batch
	for i, ids := range inputs {
		if len(ids) > e.ctx {
			return nil, fmt.Errorf("input %d has %d tokens; at most %d fit", i, len(ids), e.ctx)
		}
		e.cache.Drop(0)
		sum := make([]float64, E)
		for lo := 0; lo < len(ids); lo += e.batch {
			if err := ctx.Err(); err != nil {
				e.cache.Drop(0)
				return nil, err
			}
			hi := min(lo+e.batch, len(ids))
			b.Reset()
			for p := lo; p < hi; p++ {
				b.Add(ids[p], int32(p), 0, true)
			}
			if err := e.cache.Reserve(0, hi); err != nil {
				e.cache.Drop(0)
				return nil, err
			}
			if err := e.m.ForwardHidden(e.cache, &b, logits, hidden); err != nil {
				e.cache.Drop(0)
				return nil, err
			}
			for r := 0; r < hi-lo; r++ {
				for k, v := range hidden[r*E : (r+1)*E] {
					sum[k] += float64(v)
				}
			}
		}
		e.cache.Drop(0)
		out[i] = normalize(sum, len(ids))
	}
	return out, nil
}

// normalize is the mean of the n rows summed in sum, scaled to unit
// length.
func normalize(sum []float64, n int) []float32 {
	var norm float64
	for k := range sum {
		sum[k] /= float64(n)
		norm += sum[k] * sum[k]
	}
	norm = math.Sqrt(norm)
	v := make([]float32, len(sum))
	if norm == 0 {
		return v
	}
	for k, x := range sum {
		v[k] = float32(x / norm)
	}
	return v
}

// Close frees the embedder's model instance.
func (e *LocalEmbedder) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pool != nil {
		e.pool.Close()
		e.pool, e.m, e.cache = nil, nil, nil
	}
}

type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// maxEmbedInputs bounds one request's batch, as OpenAI does (2048).
const maxEmbedInputs = 2048

// parseEmbedInput reads input: a string, a list of strings, a list of token
// ids, or a list of lists of ids; it returns texts or id lists.
func parseEmbedInput(raw json.RawMessage) (texts []string, ids [][]int32, e *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil, badRequest("input", "input is required: a string, a list of strings, or token ids")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		if len(many) == 0 {
			return nil, nil, badRequest("input", "input is an empty list")
		}
		return many, nil, nil
	}
	var toks []int32
	if json.Unmarshal(raw, &toks) == nil {
		if len(toks) == 0 {
			return nil, nil, badRequest("input", "input is an empty list")
		}
		return nil, [][]int32{toks}, nil
	}
	var lists [][]int32
	if json.Unmarshal(raw, &lists) == nil {
		if len(lists) == 0 {
			return nil, nil, badRequest("input", "input is an empty list")
		}
		return nil, lists, nil
	}
	return nil, nil, badRequest("input", "input must be a string, a list of strings, a list of token ids or a list of such lists")
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req embeddingsRequest
	if !s.post(w, r, &req) {
		return
	}
	if req.Model != "" || r.URL.Path == "/v1/embeddings" {
		if e := s.checkModel(req.Model); e != nil {
			writeError(w, e)
			return
		}
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		writeError(w, badRequest("encoding_format", "encoding_format %q is not one of float, base64", req.EncodingFormat))
		return
	}
	texts, ids, e := parseEmbedInput(req.Input)
	if e != nil {
		writeError(w, e)
		return
	}
	if n := len(texts) + len(ids); n > maxEmbedInputs {
		writeError(w, badRequest("input", "input has %d items; at most %d are allowed", n, maxEmbedInputs))
		return
	}
	b, ok := s.ready(w)
	if !ok {
		return
	}
	if b.Embed == nil {
		writeError(w, &apiError{Status: http.StatusNotImplemented, Type: "invalid_request_error", Code: "embeddings_unavailable",
			Message: "this server does not compute embeddings (started with --no-embeddings, or its backend returns no hidden states)"})
		return
	}
	if req.Dimensions != nil && *req.Dimensions != b.Embed.Dim() {
		writeError(w, badRequest("dimensions", "dimensions = %d: this model's embeddings have %d (they cannot be shortened)", *req.Dimensions, b.Embed.Dim()))
		return
	}
	for _, t := range texts {
		ids = append(ids, b.Tok.Encode(t, true, false))
	}
	total := 0
	for i, in := range ids {
		if len(in) == 0 {
			writeError(w, badRequest("input", "input[%d] is empty", i))
			return
		}
		if len(in) > b.Embed.MaxTokens() {
			writeError(w, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "input", Code: "context_length_exceeded",
				Message: fmt.Sprintf("input[%d] has %d tokens; at most %d fit (-c)", i, len(in), b.Embed.MaxTokens())})
			return
		}
		for k, id := range in {
			if id < 0 || int(id) >= b.Vocab {
				writeError(w, badRequest("input", "input[%d] token %d is %d, outside the vocabulary [0, %d)", i, k, id, b.Vocab))
				return
			}
		}
		total += len(in)
	}
	vecs, err := b.Embed.Embed(r.Context(), ids)
	if err != nil {
		if r.Context().Err() != nil {
			w.WriteHeader(499)
			return
		}
		if errors.Is(err, ErrNoEmbeddings) {
			writeError(w, &apiError{Status: http.StatusNotImplemented, Type: "invalid_request_error", Code: "embeddings_unavailable", Message: err.Error()})
			return
		}
		writeError(w, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("computing embeddings: %v", err)})
		return
	}
	noteTokens(r.Context(), total, 0)
	data := make([]embeddingData, len(vecs))
	for i, v := range vecs {
		data[i] = embeddingData{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			buf := make([]byte, 4*len(v))
			for k, x := range v {
				binary.LittleEndian.PutUint32(buf[4*k:], math.Float32bits(x))
			}
			data[i].Embedding = base64.StdEncoding.EncodeToString(buf)
		}
	}
	model := req.Model
	if model == "" {
		model = s.cfg.Model
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "data": data, "model": model,
		"usage": map[string]int{"prompt_tokens": total, "total_tokens": total},
	})
}

// EncoderEmbedder serves an encoder model (BERT and the like): one
// input at a time, pooled and normalised as the model's pooling_type says.
// Requests take turns.
type EncoderEmbedder struct {
	mu   sync.Mutex
	enc  *model.Encoder
	pool *kernels.Pool
}

// NewEncoderEmbedder binds the encoder in f, running on threads threads.
func NewEncoderEmbedder(f *gguf.Model, threads int) (*EncoderEmbedder, error) {
	pool := kernels.NewPool(max(threads, 1))
	enc, err := model.NewEncoder(f, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &EncoderEmbedder{enc: enc, pool: pool}, nil
}

// Config is the encoder's shape and pooling.
func (e *EncoderEmbedder) Config() model.EncoderConfig { return e.enc.Cfg }

// Dim is the embedding width.
func (e *EncoderEmbedder) Dim() int { return e.enc.Cfg.Embd }

// MaxTokens is the encoder's context (its position table's length).
func (e *EncoderEmbedder) MaxTokens() int { return e.enc.Cfg.Context }

// Embed runs each input through the encoder.
func (e *EncoderEmbedder) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pool == nil {
		return nil, fmt.Errorf("%w: the encoder is closed", ErrNoEmbeddings)
	}
	out := make([][]float32, len(inputs))
	for i, ids := range inputs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v, err := e.enc.Embed(ids)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// Close frees the encoder's threads.
func (e *EncoderEmbedder) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pool != nil {
		e.pool.Close()
		e.pool = nil
	}
}
