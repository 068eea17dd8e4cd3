package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

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

// checkEnv refuses settings of braid's environment variables that would
// otherwise be ignored silently.
func checkEnv() error {
	if v, ok := os.LookupEnv("BRAID_KERNELS"); ok && v != "" && v != "generic" {
		return fmt.Errorf("BRAID_KERNELS=%q: the only setting is generic (the pure-Go reference kernels); unset it for the kernels this CPU's features select", v)
	}
	return nil
}

// checkHostPort refuses a worker address without a port at once (dialling
// it fails only after the connect timeout).
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return fmt.Errorf("no port: give HOST:PORT, the worker's --listen")
		}
		return err
	}
	_ = host // empty: this machine, as net.Dial reads it
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return nil
}
