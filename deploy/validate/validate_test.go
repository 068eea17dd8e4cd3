package validate

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	repoDir   = mustAbs("../..")
	deployDir = mustAbs("..")
	// braidBin is braid built as deploy/container/Dockerfile builds it
	// (TestMain), the binary whose flags the files are checked against.
	braidBin string
	buildErr error
)

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "braid-validate-")
	if err != nil {
		panic(err)
	}
	braidBin = filepath.Join(dir, "braid")
	buildErr = BuildBraid(repoDir, deployDir, braidBin)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func needBraid(t *testing.T) {
	t.Helper()
	if buildErr != nil {
		t.Fatalf("building braid as deploy/container/Dockerfile does: %v", buildErr)
	}
}

// systemdAnalyze finds systemd-analyze; without it a test skips, or fails
// where CI asks for it.
func systemdAnalyze(t *testing.T, skip bool) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err == nil {
		return p
	}
	if os.Getenv("BRAID_REQUIRE_SYSTEMD") == "1" || os.Getenv("BRAID_REQUIRE_TESTDATA") == "1" {
		t.Fatal("systemd-analyze is not on PATH (apt-get install systemd), and BRAID_REQUIRE_SYSTEMD or BRAID_REQUIRE_TESTDATA is 1")
	}
	if skip {
		t.Skip("systemd-analyze is not on PATH (apt-get install systemd): the units are not verified")
	}
	return ""
}

func check(t *testing.T, dir, analyze string) []Problem {
	t.Helper()
	probs, err := Check(Config{Deploy: dir, Repo: repoDir, Braid: braidBin, SystemdAnalyze: analyze, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return probs
}

// TestDeploy checks every file of deploy/.
func TestDeploy(t *testing.T) {
	needBraid(t)
	analyze := systemdAnalyze(t, false)
	if analyze == "" {
		t.Log("systemd-analyze is not on PATH: the units are checked without `systemd-analyze verify` (TestSystemdAnalyze skips)")
	}
	for _, p := range check(t, deployDir, analyze) {
		t.Error(p)
	}
}

// copyDeploy copies deploy/ (less this module) for a test to break.
func copyDeploy(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(deployDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(deployDir, p)
		if d.IsDir() {
			if rel == "validate" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// breakage is a change to one deployment file that the checks must catch.
type breakage struct {
	file     string    // relative to deploy/
	old, new string    // the first old becomes new; old "" writes new as the file
	also     [2]string // a second change to the same file, when not empty
	want     string    // a problem naming this, new with the change
	wantFile string    // the file that problem is reported on (default: file)
}

func (b breakage) apply(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(b.file))
	if b.old == "" {
		if err := os.WriteFile(p, []byte(b.new), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	text, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), b.old) {
		t.Fatalf("%s no longer holds %q: update the test", b.file, b.old)
	}
	out := strings.Replace(string(text), b.old, b.new, 1)
	if b.also[0] != "" {
		if !strings.Contains(out, b.also[0]) {
			t.Fatalf("%s no longer holds %q: update the test", b.file, b.also[0])
		}
		out = strings.Replace(out, b.also[0], b.also[1], 1)
	}
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

var (
	baselineMu sync.Mutex
	baselines  = map[string]map[string]bool{} // by systemd-analyze path
)

// runBreakages applies each breakage to a fresh copy of deploy/ and wants
// a problem that the unbroken copy does not have.
func runBreakages(t *testing.T, analyze string, cases []breakage) {
	needBraid(t)
	baselineMu.Lock()
	baseline := baselines[analyze]
	if baseline == nil {
		baseline = map[string]bool{}
		for _, p := range check(t, copyDeploy(t), analyze) {
			baseline[p.String()] = true
		}
		baselines[analyze] = baseline
	}
	baselineMu.Unlock()
	for _, b := range cases {
		t.Run(b.file+"/"+b.want, func(t *testing.T) {
			t.Parallel()
			dir := copyDeploy(t)
			b.apply(t, dir)
			wantFile := b.wantFile
			if wantFile == "" {
				wantFile = b.file
			}
			var got []string
			for _, p := range check(t, dir, analyze) {
				if baseline[p.String()] {
					continue
				}
				got = append(got, p.String())
				if p.File == wantFile && strings.Contains(p.Msg, b.want) {
					return
				}
			}
			t.Errorf("%s: %q -> %q: no new problem on %s naming %q; new problems: %q", b.file, b.old, b.new, wantFile, b.want, got)
		})
	}
}

// TestCatchesBrokenFiles breaks the deployment files one way at a time.
func TestCatchesBrokenFiles(t *testing.T) {
	const lws = "kubernetes/leaderworkerset.yaml"
	const workers = "kubernetes/statefulset/workers.yaml"
	const leader = "kubernetes/statefulset/leader.yaml"
	runBreakages(t, "", []breakage{
		// Strict decoding.
		{file: lws, old: "command: [braid]", new: "command: [braid]\n            imagePullPolcy: Always", want: `unknown field "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].imagePullPolcy"`},
		{file: workers, old: "serviceName: braid-workers", new: "ServiceName: braid-workers", want: `unknown field "spec.ServiceName"`},
		{file: workers, old: "  replicas: 2\n", new: "  replicas: 2\n  replicas: 3\n", want: "already set in map"},
		{file: workers, old: "memory: 64Gi", new: "memory: 64GB", want: "quantities must match"},
		{file: lws, old: "startupPolicy: LeaderCreated", new: "startupPolcy: LeaderCreated", want: `unknown field "spec.startupPolcy"`},
		{file: lws, old: "restartPolicy: None", new: "restartPolicy: Never", want: `restartPolicy "Never" is not one of`},
		{file: leader, old: "kind: Deployment", new: "kind: Deploymnet", want: `unknown kind "Deploymnet"`},
		{file: "prometheus/podmonitor.yaml", old: "podMetricsEndpoints:", new: "podMetricEndpoints:", want: "unknown field"},
		{file: "kubernetes/secret/kustomization.yaml", old: "secretGenerator:", new: "secretGenerators:", want: "unknown field"},
		// braid's flags.
		{file: lws, old: "--split=tensor", new: "--splitt=tensor", want: "braid serve has no flag --splitt"},
		{file: lws, old: "--grace=30s", new: "--grace=30", want: "not a duration"},
		{file: workers, old: "- worker\n", new: "- worker\n            - stray\n", want: `takes no arguments, got "stray"`},
		{file: "systemd/braid.env", old: "--parallel 8", new: "--paralel 8", want: "braid serve has no flag --paralel", wantFile: "systemd/braid-serve.service"},
		{file: "README.md", old: "--split tensor", new: "--split-mode tensor", want: "has no flag --split-mode"},
		// Ports, probes, volumes.
		{file: lws, old: "port: health", new: "port: healthz", want: "is not a port the container declares"},
		{file: workers, old: "path: /health", new: "path: /healthz", want: "answers it at /health"},
		{file: lws, old: "--listen=0.0.0.0:7000", new: "--listen=0.0.0.0:7100", want: "the leader dials them on --worker-port 7000"},
		{file: leader, old: "--listen=0.0.0.0:8080", new: "--listen=127.0.0.1:8080", want: "is loopback"},
		{file: leader, old: "--secret-file=/etc/braid/secret/secret", new: "--secret-file=/etc/braid/secrets/secret", want: "is in no mounted volume"},
		{file: workers, old: "--secret-file=/etc/braid/secret/secret", new: "--secret-file=/etc/braid/secret/token", want: "reads key token of Secret braid-secret"},
		{file: lws, old: "secretName: braid-secret", new: "secretName: braid-secrets", want: "mounts Secret braid-secrets, which nothing in deploy/ makes"},
		{file: leader, old: "terminationGracePeriodSeconds: 60", new: "terminationGracePeriodSeconds: 30", want: "is not above the preStop sleep"},
		{file: leader, old: "failureThreshold: 180", new: "failureThreshold: 18", want: "a 100 GB model needs"},
		{file: lws, old: "--threads=16", new: "--threads=32", want: "is more than the CPU limit"},
		{file: lws, old: "value: /cache", new: "value: /var/cache/braid", want: "is not in a writable mount"},
		{file: lws, old: "startupPolicy: LeaderCreated", new: "startupPolicy: LeaderReady", want: "use LeaderCreated"},
		{file: workers, old: "image: ghcr.io/example/braid:latest", new: "image: ghcr.io/example/braid:v2", want: "every rank must run the same build", wantFile: "kubernetes/statefulset"},
		// DNS discovery.
		{file: leader, old: "$(POD_NAMESPACE)", new: "$(POD_NAMESPCE)", want: "which the container's env does not define"},
		{file: leader, old: "--ranks=3", new: "--ranks=4", want: "make 3 ranks"},
		{file: leader, old: "--discover=dns:braid-workers.", new: "--discover=dns:braid-worker.", want: "no Service braid-worker in kubernetes/statefulset/"},
		{file: workers, old: "publishNotReadyAddresses: true", new: "publishNotReadyAddresses: false", want: "publishNotReadyAddresses"},
		{file: workers, old: "- name: braid\n      port: 7000", new: "- name: control\n      port: 7000", want: "no port named braid"},
		{file: lws, old: "app.kubernetes.io/component: leader\n  ports:", new: "app.kubernetes.io/component: leaders\n  ports:", want: "matches no pod template"},
		{file: workers, old: "    matchLabels:\n      app.kubernetes.io/name: braid\n      app.kubernetes.io/component: worker", new: "    matchLabels:\n      app.kubernetes.io/name: braid\n      app.kubernetes.io/component: workers", want: "does not select its template's labels"},
		// Files and folders.
		{file: "kubernetes/kustomization.yaml", new: "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [leaderworkerset.yaml]\n", want: "breaks `kubectl apply -f kubernetes/`"},
		{file: "kubernetes/secret.yaml", new: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: braid-secret\nstringData:\n  secret: hunter2hunter2\n", want: "commit no secret"},
		{file: "kubernetes/notes.txt", new: "notes\n", want: "no check covers this file"},
		{file: "kubernetes/secret/.gitignore", old: "secret\n", new: "\n", want: "which no .gitignore beside it keeps out", wantFile: "kubernetes/secret/kustomization.yaml"},
		{file: "README.md", old: "deploy/kubernetes/statefulset/", new: "deploy/kubernetes/sts/", want: "names deploy/kubernetes/sts, which does not exist"},
		{file: "README.md", old: "--from-file=secret=", new: "--from-file=token=", want: "makes keys"},
		// Prometheus.
		{file: "prometheus/prometheus.yml", old: "regex: braid;leader", new: "regex: braid;worker", want: "does not scrape the leader's API"},
		// Any braid pod's health port too.
		{file: "prometheus/prometheus.yml", old: "regex: braid;leader", new: "regex: braid;.*", also: [2]string{"regex: http\n", "regex: http|health\n"}, want: "which serves no /metrics"},
		{file: "prometheus/prometheus.yml", old: "scrape_interval: 15s", new: "scrape_intervall: 15s", want: "unknown field"},
		{file: "prometheus/prometheus.yml", old: "node1.example.internal:8080", new: "node1.example.internal:9090", want: "braid-serve.service listens on [8080]"},
		{file: "prometheus/podmonitor.yaml", old: "port: http", new: "port: metrics", want: "endpoint port"},
		// systemd units, without systemd-analyze.
		{file: "systemd/braid-serve.service", old: "TimeoutStopSec=45s", new: "TimeoutStopSec=30s", want: "is not above --grace"},
		{file: "systemd/braid-serve.service", old: "${BRAID_MODEL}", new: "${BRAID_MODE}", want: "uses ${BRAID_MODE}, which no Environment="},
		{file: "systemd/braid-worker.service", old: "LoadCredential=secret:", new: "LoadCredential=token:", want: "no LoadCredential=secret"},
		{file: "systemd/braid-worker.service", old: "XDG_CACHE_HOME=%C ", new: "XDG_CACHE_HOME=/var/cache/other ", want: "is not writable under ProtectSystem=strict"},
		{file: "systemd/braid-worker.service", old: "DynamicUser=yes", new: "DynamicUser=no", want: "DynamicUser"},
		{file: "systemd/user/braid-worker.service", old: "Restart=on-failure", new: "Restart=no", want: "a crashed rank should come back"},
		// The image recipes.
		{file: "container/Dockerfile", old: "RUN CGO_ENABLED=0 go build", new: "RUN go build", want: "lacks CGO_ENABLED=0"},
		{file: "container/Dockerfile", old: "FROM golang:1.26 AS build", new: "FROM golang:1.21 AS build", want: "is older than go.mod's"},
		{file: "container/Dockerfile", old: `ENTRYPOINT ["/usr/local/bin/braid"]`, new: `ENTRYPOINT ["/braid"]`, want: "is not the binary copied"},
		{file: "container/Dockerfile", old: "FROM gcr.io/distroless/static-debian12:nonroot", new: "FROM gcr.io/distroless/base-debian12:nonroot", want: "distroless static base"},
		{file: "container/.ko.yaml", old: "defaultAppDirectory: /usr/local/bin", new: "", want: "ko puts braid at /ko-app/braid"},
		{file: "container/.ko.yaml", old: "      - -trimpath", new: "      - -v", want: "without it"},
	})
}

// TestSystemdAnalyze: the units pass `systemd-analyze verify`, and what it
// refuses (an unknown directive, a bad value) is a problem.
func TestSystemdAnalyze(t *testing.T) {
	analyze := systemdAnalyze(t, true)
	runBreakages(t, analyze, []breakage{
		{file: "systemd/braid-worker.service", old: "ProtectClock=yes", new: "ProtectClok=yes", want: "Unknown key"},
		{file: "systemd/braid-serve.service", old: "RestartSec=5s", new: "RestartSec=5 parsecs", want: "5 parsecs"},
		{file: "systemd/user/braid-serve.service", old: "[Service]", new: "[Servce]", want: "Servce"},
	})
}

// TestBuildBreaks: the image's build fails when its context lacks the
// sources, or when the revision does not reach the binary.
func TestBuildBreaks(t *testing.T) {
	needBraid(t)
	for _, b := range []breakage{
		{file: "container/Dockerfile.dockerignore", old: "\nbin\n", new: "\nbin\ninternal\n", want: "in its context failed"},
		{file: "container/Dockerfile", old: "sysinfo.Revision=", new: "sysinfo.Revison=", want: "the -X variable is wrong"},
	} {
		dir := copyDeploy(t)
		b.apply(t, dir)
		err := BuildBraid(repoDir, dir, filepath.Join(t.TempDir(), "braid"))
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: %q -> %q: BuildBraid gave %v, want an error naming %q", b.file, b.old, b.new, err, b.want)
		}
	}
}

// TestHelpParsed: the flag list read from braid's help has the flags'
// names, aliases, types and defaults.
func TestHelpParsed(t *testing.T) {
	needBraid(t)
	c := &checker{cfg: Config{Braid: braidBin}, flagSets: map[string]*flagSet{}}
	fs, err := c.flagsOf("serve")
	if err != nil {
		t.Fatal(err)
	}
	if m, model := fs.flags["m"], fs.flags["model"]; m == nil || m != model || m.typ != "string" {
		t.Errorf("-m and --model: %+v and %+v, want one string flag", m, model)
	}
	if g := fs.flags["grace"]; g == nil || g.typ != "duration" {
		t.Errorf("--grace: %+v, want a duration", g)
	} else if d, err := time.ParseDuration(g.def); err != nil || d <= 0 {
		t.Errorf("--grace's default %q is not a positive duration", g.def)
	}
	if k := fs.flags["kv-f32"]; k == nil || k.typ != "" {
		t.Errorf("--kv-f32: %+v, want a boolean flag", k)
	}
}

func TestIgnored(t *testing.T) {
	pats, err := ignorePatterns("# c\n.git\nbin\n**/*_test.go\n**/testdata\n/docs\n")
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]bool{
		".git": true, ".git/config": true, "bin/braid": true, "cmd/braid/main.go": false,
		"cmd/braid/main_test.go": true, "internal/model/testdata/x.gguf": true, "docs/A.md": true,
		"internal/bin/x.go": false, "go.mod": false,
	} {
		if got := ignored(pats, rel); got != want {
			t.Errorf("ignored(%q) = %v, want %v", rel, got, want)
		}
	}
	if _, err := ignorePatterns("!keep\n"); err == nil {
		t.Error("an exception pattern was accepted")
	}
}

func TestTimeSpanAndWords(t *testing.T) {
	for s, want := range map[string]time.Duration{"45s": 45 * time.Second, "90": 90 * time.Second,
		"1min 30s": 90 * time.Second, "2h": 2 * time.Hour, "500ms": 500 * time.Millisecond} {
		if got, ok := timeSpan(s); !ok || got != want {
			t.Errorf("timeSpan(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
	if _, ok := timeSpan("5 parsecs"); ok {
		t.Error(`timeSpan("5 parsecs") parsed`)
	}
	ws, err := words(`a "b c" 'd e' f\ g`)
	if err != nil || strings.Join(ws, "|") != "a|b c|d e|f g" {
		t.Errorf("words: %q, %v", ws, err)
	}
	if _, err := words(`a "b`); err == nil {
		t.Error("an unterminated quote was accepted")
	}
}
