package spec

import (
	"fmt"

	"braid/internal/model"
)

// CheckTarget refuses a target model speculative decoding cannot run on,
// from its configuration alone (before anything is loaded, on every rank
// of a split): a recurrent (Gated DeltaNet) layer keeps one state per
// sequence, which holds the last position only and cannot be rolled back
// past a rejected draft. (engine.CheckRollback checks a cache the same
// way.) Checkpointing the state before each verification would lift this;
// it is not built.
func CheckTarget(c *model.Config) error {
	if c.SSM != nil {
		n := 0
		for l := 0; l < c.Layers; l++ {
			if c.IsRecurrent(l) {
				n++
			}
		}
		return fmt.Errorf("speculative decoding is not available for %s: its %d recurrent (DeltaNet) layers keep one state per sequence that cannot be rolled back past a rejected draft (no state checkpoints yet); run without --spec", c.Arch, n)
	}
	return nil
}
