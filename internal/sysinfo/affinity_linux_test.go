package sysinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestPin pins a child test process to one CPU: every thread it had, and
// threads started after, may run on that CPU only.
func TestPin(t *testing.T) {
	if cpu := os.Getenv("BRAID_TEST_PIN"); cpu != "" {
		pinChild(t, cpu)
		return
	}
	aff, err := Affinity()
	if err != nil || len(aff) == 0 {
		t.Fatalf("affinity: %v %v", aff, err)
	}
	if runtime.NumCPU() != len(aff) {
		t.Errorf("the mask has %d CPUs, runtime.NumCPU %d", len(aff), runtime.NumCPU())
	}
	cpu := strconv.Itoa(aff[len(aff)-1])
	cmd := exec.Command(os.Args[0], "-test.run=^TestPin$", "-test.v")
	cmd.Env = append(os.Environ(), "BRAID_TEST_PIN="+cpu)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "threads pinned") {
		t.Fatalf("the pinned child failed: %v\n%s", err, out)
	}
}

func pinChild(t *testing.T, cpu string) {
	want, _ := strconv.Atoi(cpu)
	if err := Pin([]int{want}); err != nil {
		t.Fatal(err)
	}
	// Threads made after the pin: goroutines locked to fresh OS threads.
	var started, release sync.WaitGroup
	release.Add(1)
	for range 4 {
		started.Add(1)
		go func() {
			runtime.LockOSThread()
			started.Done()
			release.Wait()
		}()
	}
	started.Wait()
	defer release.Done()
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) < 5 {
		t.Fatalf("%d threads: %v", len(tasks), err)
	}
	for _, p := range tasks {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) != cpu {
				t.Errorf("%s may run on %s, want %s", p, strings.TrimSpace(v), cpu)
			}
		}
	}
	if aff, _ := Affinity(); len(aff) != 1 || aff[0] != want {
		t.Errorf("the mask after Pin is %v", aff)
	}
	t.Logf("%d threads pinned to %s", len(tasks), cpu)
}

func TestPinRefusesNothing(t *testing.T) {
	if err := Pin(nil); err == nil {
		t.Error("Pin(nil) succeeded")
	}
	if err := Pin([]int{1 << 20}); err == nil || !strings.Contains(err.Error(), "1048576") {
		t.Errorf("Pin of CPU 2^20: %v, want an error naming it", err)
	}
}
