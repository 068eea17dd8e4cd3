package main

import (
	"fmt"

	"braid/internal/gguf"
)

// refuseShard refuses a shard file written by `braid split` (or cached by
// a worker) where a whole model is wanted: it holds only one rank's slices
// of the weights, the rest are holes that read as zeros, and it would run
// and print garbage.
func refuseShard(f *gguf.Model) error {
	rank, ok := f.Int("braid.shard.rank")
	if !ok {
		return nil
	}
	world, _ := f.Int("braid.shard.world")
	return fmt.Errorf("%s is a shard file (rank %d of %d, written by braid split): it holds that rank's slices only; give it to a worker (braid worker --models-dir DIR) and run the whole model with -m",
		f.Files[0].Path, rank, world)
}
