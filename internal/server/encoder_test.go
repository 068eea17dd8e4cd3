package server

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"braid/internal/gguf"
	"braid/internal/modelgen"
	"braid/internal/tokenizer"
)

// TestEncoderServe: a generated bert model served as braid serve serves an
// encoder answers /v1/embeddings with llama.cpp's vector for the same text
// (internal/model/testdata/encoders, scripts/ref-encoders.sh), and the
// generation endpoints with 400 model_not_generative.
func TestEncoderServe(t *testing.T) {
	cfg, err := modelgen.Variant("bert-mean", "F32")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bert.gguf")
	if err := modelgen.WriteFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	emb, err := NewEncoderEmbedder(f, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	srv := New(Config{Model: "bert", Logf: t.Logf})
	srv.SetReady(&Backend{Tok: tok, Vocab: emb.Config().Vocab, Embed: emb, Encoder: true})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	raw, err := os.ReadFile("../model/testdata/encoders/bert-mean-F32.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	texts, err := os.ReadFile("../model/testdata/encoders/texts.txt")
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(string(texts), "\n", 2)[0]
	body, _ := json.Marshal(map[string]any{"model": "bert", "input": []string{first, "x"}})
	resp, err := http.Post(ts.URL+"/v1/embeddings", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(got.Data) != 2 {
		t.Fatalf("/v1/embeddings: %d, %d vectors", resp.StatusCode, len(got.Data))
	}
	want := ref.Cases[0].Embedding
	if len(got.Data[0].Embedding) != len(want) {
		t.Fatalf("%d values, llama.cpp %d", len(got.Data[0].Embedding), len(want))
	}
	for k, v := range got.Data[0].Embedding {
		if math.Abs(v-want[k]) > 2e-5 {
			t.Fatalf("component %d: %g, llama.cpp %g", k, v, want[k])
		}
	}
	// [CLS] hello , world ! [SEP] and [CLS] x [SEP]
	if got.Usage.PromptTokens != 6+3 {
		t.Errorf("prompt_tokens %d, want 9", got.Usage.PromptTokens)
	}

	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"bert","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/completions", `{"model":"bert","prompt":"hi"}`},
		{"/completion", `{"prompt":"hi"}`},
		{"/v1/responses", `{"model":"bert","input":"hi"}`},
	} {
		resp, err := http.Post(ts.URL+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 400 || e.Error.Code != "model_not_generative" || !strings.Contains(e.Error.Message, "embeddings") {
			t.Errorf("%s: %d %+v, want 400 model_not_generative", c.path, resp.StatusCode, e.Error)
		}
	}
	for _, p := range []string{"/health", "/props", "/v1/models"} {
		resp, err := http.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d on an encoder", p, resp.StatusCode)
		}
		if p == "/v1/models" && !strings.Contains(string(body), `"capabilities":["embedding"]`) {
			t.Errorf("GET /v1/models on an encoder: %s, want the embedding capability", body)
		}
	}
}
