package main

import (
	"encoding/json"
	"math"
	"testing"
)

// TestServeEmbeddingsCluster: /v1/embeddings of braid serve over real
// worker processes (a layer split, the hidden states returned by the last
// stage, and a tensor split) equal the single node's.
func TestServeEmbeddingsCluster(t *testing.T) {
	needShared(t, stories)
	body := `{"input": ["Once upon a time there was a little dog.", "Hi", "The cat sat on the mat and looked at the big red ball."]}`
	embed := func(url string) [][]float64 {
		code, _, v := call(t, "POST", url+"/v1/embeddings", "", body)
		if code != 200 {
			t.Fatalf("POST %s/v1/embeddings: %d %v", url, code, v)
		}
		var out struct {
			Data []struct {
				Embedding []float64 `json:"embedding"`
			} `json:"data"`
		}
		b, _ := json.Marshal(v)
		if err := json.Unmarshal(b, &out); err != nil || len(out.Data) != 3 {
			t.Fatalf("%s: %v %s", url, err, b)
		}
		var vs [][]float64
		for _, d := range out.Data {
			vs = append(vs, d.Embedding)
		}
		return vs
	}
	single, _ := llamaServe(t, nil)
	want := embed(single)
	for _, mk := range []func() []string{
		func() []string { return []string{"--workers", startWorker(t, nil), "--split", "layer"} },
		func() []string {
			return []string{"--workers", startWorker(t, nil) + "," + startWorker(t, nil), "--split", "tensor"}
		},
		func() []string {
			return []string{"--workers", startWorker(t, nil) + "," + startWorker(t, nil), "--split", "layer", "--tensor-split", "1,2,1"}
		},
	} {
		// Each serve holds its workers until the test ends: new ones each.
		split := mk()
		url, _ := llamaServe(t, nil, split...)
		got := embed(url)
		for i := range want {
			if len(got[i]) != len(want[i]) {
				t.Fatalf("%v: item %d has %d values, single node %d", split, i, len(got[i]), len(want[i]))
			}
			d := 0.0
			for k := range want[i] {
				d = math.Max(d, math.Abs(got[i][k]-want[i][k]))
			}
			if d > 1e-5 {
				t.Errorf("%v: item %d differs from the single node's by up to %g", split, i, d)
			}
		}
	}
}
