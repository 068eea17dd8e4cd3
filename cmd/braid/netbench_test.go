package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestNetbenchLocal(t *testing.T) {
	for _, args := range [][]string{
		{"netbench", "--local", "3", "--max-bytes", "16K", "--ping-iters", "50", "--bw-bytes", "64K", "--budget", "256K"},
		{"netbench", "--local", "2", "--inproc", "--max-bytes", "4K", "--ping-iters", "20", "--bw-bytes", "4K", "--algos", "oneshot,ring"},
	} {
		out, errOut, code := braid(t, "", args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		for _, want := range []string{"point to point", "lat p50", "busbw", "oneshot", "best fit: one-shot up to"} {
			if !strings.Contains(out, want) {
				t.Fatalf("%v: no %q in\n%s", args, want, out)
			}
		}
		if args[3] == "3" && (!strings.Contains(errOut, "dist: connected") || !strings.Contains(errOut, "transport=tcp")) {
			t.Fatalf("the transport and addresses are not logged:\n%s", errOut)
		}
	}
	out, _, code := braid(t, "", "netbench", "--local", "2", "--json", "--max-bytes", "2K", "--ping-iters", "10", "--bw-bytes", "4K")
	var rep struct {
		Ranks int `json:"ranks"`
		Sweep []struct {
			Bytes int     `json:"bytes"`
			BusBW float64 `json:"busbw_gbps"`
		} `json:"allreduce"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Ranks != 2 || len(rep.Sweep) != 6 {
		t.Fatalf("json: exit %d, %+v\n%s", code, rep, out)
	}
}

func TestNetbenchBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"netbench"}, "say --local N"},
		{[]string{"netbench", "--local", "2", "--max-bytes", "lots"}, "--max-bytes"},
		{[]string{"netbench", "--local", "2", "--algos", "carrier-pigeon"}, "--algos"},
		{[]string{"netbench", "--rank", "1"}, "needs --addrs"},
		{[]string{"netbench", "--local", "2", "--rank", "0"}, "exclude each other"},
	} {
		_, errOut, code := braid(t, "", tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Fatalf("%v: exit %d, want 2 and %q in:\n%s", tc.args, code, tc.want, errOut)
		}
	}
}

// TestNetbenchLocalSpin: more ranks than procs in one process turn the
// receive polling off, and say so; --net-spin given keeps it (the flag is
// honoured by --local as by --workers).
func TestNetbenchLocalSpin(t *testing.T) {
	t.Setenv("GOMAXPROCS", "2") // the subprocess's procs, whatever this machine has
	args := []string{"netbench", "--local", "3", "--max-bytes", "4K", "--ping-iters", "20", "--bw-bytes", "4K", "--budget", "64K", "--algos", "oneshot"}
	_, errOut, code := braid(t, "", args...)
	if code != 0 || !strings.Contains(errOut, "3 ranks on 2 CPUs in one process: receives do not poll") {
		t.Fatalf("%v: exit %d, want the note that receives do not poll in:\n%s", args, code, errOut)
	}
	args = append(args, "--net-spin", "100us")
	_, errOut, code = braid(t, "", args...)
	if code != 0 || strings.Contains(errOut, "do not poll") {
		t.Fatalf("%v: exit %d, want no note (the spin was asked for):\n%s", args, code, errOut)
	}
}
