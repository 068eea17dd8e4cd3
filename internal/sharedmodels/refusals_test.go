package sharedmodels

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"braid/internal/sharedtest"
)

// TestCheck: a refusal the table lists passes only with its own text; an
// unlisted refusal and a listed split that runs both fail.
func TestCheck(t *testing.T) {
	refused := errors.New("model: tensor split [1 1] over 2 ranks leaves rank 1 with no attention heads and no FFN columns")
	for _, tc := range []struct {
		model   string
		tp, pp  int
		w       []float64
		err     error
		msg     string // a part of the message; "" for none
		refused bool
	}{
		{"tiny-qwen3moe-Q4_K_M.gguf", 2, 1, nil, refused, "", true},
		{"tiny-qwen3moe-Q4_K_M", 2, 2, nil, refused, "", true},
		{"tiny-qwen3moe-Q4_K_M", 1, 2, nil, refused, "lists no such refusal", false},
		{"tiny-qwen3moe-Q4_K_M", 1, 2, nil, nil, "", false},
		{"tiny-qwen3moe-Q4_K_M", 3, 1, nil, nil, "must be refused", false},
		{"tiny-qwen3moe-Q4_K_M", 2, 1, nil, errors.New("connection refused"), "another reason", false},
		{"tiny-llama-Q4_K_M", 2, 1, []float64{3, 1}, refused, "", true},
		{"tiny-llama-Q4_K_M", 2, 1, []float64{1, 3}, refused, "lists no such refusal", false},
		{"tiny-llama-Q8_0", 2, 1, []float64{3, 1}, refused, "lists no such refusal", false},
	} {
		msg, got := Check(tc.model, tc.tp, tc.pp, tc.w, tc.err)
		if got != tc.refused || (tc.msg == "") != (msg == "") || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s tp%d pp%d %v (%v): %q, refused %v; want a message with %q, refused %v", tc.model, tc.tp, tc.pp, tc.w, tc.err, msg, got, tc.msg, tc.refused)
		}
	}
}

// TestRefusalsNameSharedModels: every model the table names is a file of
// the shared data, so a renamed model cannot leave an entry that never
// matches.
func TestRefusalsNameSharedModels(t *testing.T) {
	dir := "../../../shared/testdata/models"
	if _, err := os.Stat(dir); err != nil {
		sharedtest.Missing(t, "shared test data absent: %v", err)
	}
	for _, r := range Refusals {
		for _, m := range r.Models {
			if files, _ := filepath.Glob(filepath.Join(dir, "*", m+".gguf")); len(files) != 1 {
				t.Errorf("the refusal %q names %s, which is not one file under %s", r.Splits, m, dir)
			}
		}
	}
}
