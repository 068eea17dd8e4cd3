package dist

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The switchless triangle: three nodes, one cable (veth pair) and one /24
// per edge, so each rank reaches each peer at a different address.
//
//	A=rank 0  --10.77.1.0/24--  B=rank 1
//	A=rank 0  --10.77.3.0/24--  C=rank 2
//	B=rank 1  --10.77.2.0/24--  C=rank 2
var triangle = struct {
	edges [3][2]string // veth names in the first and second namespace
	addrs [3][3]string // addrs[i][j]: where rank i reaches rank j
}{
	edges: [3][2]string{{"ab", "ba"}, {"bc", "cb"}, {"ca", "ac"}},
	addrs: [3][3]string{
		{"", "10.77.1.2:7100", "10.77.3.3:7100"},
		{"10.77.1.1:7100", "", "10.77.2.3:7100"},
		{"10.77.3.1:7100", "10.77.2.2:7100", ""},
	},
}

const netnsHelperEnv = "BRAID_NETNS_HELPER_RANK"

// TestNetnsTriangle builds the triangle with ip netns and runs one rank per
// namespace (the test binary re-executed in it), all-reducing over the
// per-pair addresses. It needs root (CI runs as root); elsewhere it skips.
func TestNetnsTriangle(t *testing.T) {
	if os.Getenv(netnsHelperEnv) != "" {
		t.Skip("running as a helper")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netns test skipped: the ip command (iproute2) is not installed")
	}
	var rnd [3]byte
	rand.Read(rnd[:])
	prefix := fmt.Sprintf("braid-%d-%s-", os.Getpid(), hex.EncodeToString(rnd[:]))
	ns := []string{prefix + "a", prefix + "b", prefix + "c"}
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := ip("netns", "add", ns[0]); err != nil {
		t.Skipf("netns test skipped: this machine does not allow network namespaces (needs root or CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { ip("netns", "del", ns[0]) })
	for _, n := range ns[1:] {
		if err := ip("netns", "add", n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ip("netns", "del", n) }) // deleting a namespace removes its veths
	}
	// Edge k joins node k and node k+1 (mod 3); its /24 is 10.77.(k+1).0,
	// and node i's host number is i+1.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		must(ip("-n", ns[i], "link", "set", "lo", "up"))
	}
	for k, e := range triangle.edges {
		a, b := k, (k+1)%3
		must(ip("-n", ns[a], "link", "add", e[0], "type", "veth", "peer", "name", e[1], "netns", ns[b]))
		must(ip("-n", ns[a], "addr", "add", fmt.Sprintf("10.77.%d.%d/24", k+1, a+1), "dev", e[0]))
		must(ip("-n", ns[b], "addr", "add", fmt.Sprintf("10.77.%d.%d/24", k+1, b+1), "dev", e[1]))
		must(ip("-n", ns[a], "link", "set", e[0], "up"))
		must(ip("-n", ns[b], "link", "set", e[1], "up"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	outs := make([]string, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns[r], os.Args[0], "-test.run=^TestNetnsHelper$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), netnsHelperEnv+"="+strconv.Itoa(r), "BRAID_SECRET=netns-test-shared-secret")
			out, err := cmd.CombinedOutput()
			outs[r], errs[r] = string(out), err
		})
	}
	wg.Wait()
	var sums []string
	for r := range 3 {
		if errs[r] != nil || !strings.Contains(outs[r], "NETNS-OK") {
			t.Fatalf("rank %d in %s: %v\n%s", r, ns[r], errs[r], outs[r])
		}
		for _, line := range strings.Split(outs[r], "\n") {
			if _, rest, ok := strings.Cut(line, "NETNS-OK "); ok {
				sums = append(sums, rest)
				t.Logf("rank %d: %s", r, rest)
			}
		}
	}
	if len(sums) != 3 || sums[0] != sums[1] || sums[1] != sums[2] {
		t.Fatalf("ranks disagree on the all-reduce results: %q", sums)
	}
}

// TestNetnsHelper is one rank of TestNetnsTriangle, run inside its
// namespace; it skips unless that test started it.
func TestNetnsHelper(t *testing.T) {
	rs := os.Getenv(netnsHelperEnv)
	if rs == "" {
		t.Skip("only run by TestNetnsTriangle inside a network namespace")
	}
	r, err := strconv.Atoi(rs)
	if err != nil || r < 0 || r > 2 {
		t.Fatalf("%s=%q", netnsHelperEnv, rs)
	}
	secret, err := LoadSecret("")
	if err != nil || secret == nil {
		t.Fatalf("secret from BRAID_SECRET: %q, %v", secret, err)
	}
	tr, err := Connect(context.Background(), MeshConfig{Rank: r, Addrs: triangle.addrs[r][:], Listen: ":7100",
		Secret: secret, Timeout: 10 * time.Second, ConnectTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// Each peer is reached on the subnet of the cable between the two.
	for p := range 3 {
		if p == r {
			continue
		}
		info := tr.Peer(p)
		wantHost := strings.Split(triangle.addrs[r][p], ":")[0]
		gotHost := strings.Split(info.Addr, ":")[0]
		if gotHost != wantHost {
			t.Fatalf("rank %d reaches rank %d at %s, want %s", r, p, info.Addr, wantHost)
		}
	}
	c := NewComm(tr)
	h := fnv.New64a()
	for _, length := range []int{0, 1, 3, 1000, 50001} {
		for _, algo := range []Algo{OneShot, TwoShot, Ring, Auto} {
			xs := inputs(3, length, uint64(length))
			ref := reference(xs)
			x := xs[r]
			if err := c.AllReduce(x, algo); err != nil {
				t.Fatal(err)
			}
			for i, v := range x {
				if math.Abs(float64(v)-ref[i]) > 1e-4*(1+math.Abs(ref[i])) {
					t.Fatalf("%s len %d [%d]: %v, reference %v", algo, length, i, v, ref[i])
				}
			}
			h.Write(bytesOf(x))
		}
	}
	fmt.Printf("NETNS-OK results=%016x\n", h.Sum64())
}
