package spec

import (
	"fmt"

	"braid/internal/model"
)

// Recurrent reports whether a target keeps recurrent state (Gated DeltaNet
// layers): one state per sequence holding the last position only, which a
// rejected draft cannot be truncated out of. The one-sequence generator
// checkpoints it (engine.Spec.Checkpoint; set it from this on a cluster,
// whose coordinator may hold none of those layers).
func Recurrent(c *model.Config) bool { return c.SSM != nil }

// CheckBatched refuses, from its configuration alone, a target whose
// speculation the server's batches cannot run: recurrent state, which is
// checkpointed only by the one-sequence generator.
func CheckBatched(c *model.Config) error {
	if Recurrent(c) {
		n := 0
		for l := 0; l < c.Layers; l++ {
			if c.IsRecurrent(l) {
				n++
			}
		}
		return fmt.Errorf("speculative decoding in the server is not available for %s: its %d recurrent (DeltaNet) layers keep one state per sequence that cannot be rolled back past a rejected draft, and the server's batches make no checkpoints yet (braid run and bench do); serve without --spec", c.Arch, n)
	}
	return nil
}
