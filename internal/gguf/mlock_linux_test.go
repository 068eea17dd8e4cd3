package gguf

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMlockRefused makes mlock fail for real: a tiny RLIMIT_MEMLOCK, and
// on a thread that has given up CAP_IPC_LOCK (which root holds, and which
// ignores the limit). The error must name the limit and how to raise it.
func TestMlockRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	w := sampleWriter(t, 3, 0)
	if err := w.AddTensor("big", sampleTensors[1].typ, []int64{64 << 10}, make([]byte, 256<<10)); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	var saved unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &saved); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	type result struct {
		err  error
		skip string
	}
	done := make(chan result)
	go func() {
		// Never unlocked: the thread that dropped the capability ends
		// with this goroutine instead of returning to the scheduler.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- result{skip: "capget: " + err.Error()}
			return
		}
		data[unix.CAP_IPC_LOCK/32].Effective &^= 1 << (unix.CAP_IPC_LOCK % 32)
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- result{skip: "capset: " + err.Error()}
			return
		}
		lim := unix.Rlimit{Cur: 64 << 10, Max: saved.Max}
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
			done <- result{skip: "setrlimit: " + err.Error()}
			return
		}
		m, err := OpenWith(path, LoadOptions{Mode: LoadMlock})
		unix.Setrlimit(unix.RLIMIT_MEMLOCK, &saved)
		if err == nil {
			m.Close()
		}
		done <- result{err: err}
	}()
	r := <-done
	if r.skip != "" {
		t.Skip(r.skip)
	}
	if r.err == nil {
		t.Fatal("mlock of a 256 KiB model under a 64 KiB RLIMIT_MEMLOCK without CAP_IPC_LOCK succeeded")
	}
	for _, want := range []string{path, "RLIMIT_MEMLOCK is 64 KiB", "ulimit -l"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
}
