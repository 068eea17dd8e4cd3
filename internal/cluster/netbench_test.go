package cluster

import (
	"encoding/json"
	"runtime"
	"testing"

	"braid/internal/dist"
	"braid/internal/engine"
	"braid/internal/model"
)

// TestNetbenchWorkers: `braid netbench --workers` measures every pair of a
// coordinator and two real workers over their data planes, and the workers
// serve a model afterwards as before.
func TestNetbenchWorkers(t *testing.T) {
	env := workerEnv(t)
	w1, w2 := startWorker(t, "127.0.0.1:0", env), startWorker(t, "127.0.0.1:0", env)
	out, errOut, code := braid(t, "netbench", "--workers", w1.addr+","+w2.addr, "--json", "--max-bytes", "64K", "--ping-iters", "50",
		"--bw-bytes", "1M", "--budget", "1M")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Transport string
		Ranks     int
		Pairs     []struct{ A, B int }
		Sweep     []struct {
			Bytes int `json:"bytes"`
		} `json:"allreduce"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.Ranks != 3 || len(rep.Pairs) != 3 || len(rep.Sweep) != 7*3 || rep.Transport != sameHostTransport() {
		t.Errorf("report of %d ranks (%s), %d pairs, %d sweep rows; want 3 (%s), 3, 21:\n%s", rep.Ranks, rep.Transport, len(rep.Pairs), len(rep.Sweep), sameHostTransport(), out)
	}
	path := sharedModel(t, "stories260K/stories260K-Q8_0.gguf")
	c := openCluster(t, path, "tensor", nil, w1, w2)
	var b model.Batch
	b.Add(1, 0, 0, true)
	if err := c.Forward(&b, engine.Output{TopK: 1}, make([]float32, c.Vocab())); err != nil {
		t.Fatalf("a step after netbench: %v", err)
	}
}

// sameHostTransport is the data plane's kind between ranks on this host:
// shared memory beside the TCP connection on Linux unless BRAID_NO_SHM.
func sameHostTransport() string {
	if runtime.GOOS == "linux" && dist.ShmDefault() {
		return "tcp+shm"
	}
	return "tcp"
}
