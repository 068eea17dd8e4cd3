package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTLSCluster: `braid certs` makes a CA and node directories; workers
// started with --tls-dir, driven by `braid run --tls-dir`, give the tokens
// the same split gives over plain TCP, tensor and layer. A coordinator in
// plain TCP, one whose certificate another CA signed, and one with no
// certificate directory at all are each refused with the reason, and the
// worker serves the right coordinator after each.
func TestTLSCluster(t *testing.T) {
	tiny := filepath.Join(shared, "models", "tiny-llama", "tiny-llama-Q4_K_M.gguf")
	needShared(t, tiny)
	dir := t.TempDir()
	pki, other := filepath.Join(dir, "pki"), filepath.Join(dir, "other")
	if out, errOut, code := braid(t, "", "certs", pki, "coord:127.0.0.1", "w1:127.0.0.1", "w2:127.0.0.1"); code != 0 || !strings.Contains(out, "made a CA") {
		t.Fatalf("braid certs: exit %d: %s %s", code, out, errOut)
	}
	if _, errOut, code := braid(t, "", "certs", other, "intruder"); code != 0 {
		t.Fatalf("braid certs (other CA): exit %d: %s", code, errOut)
	}
	out, _, code := braid(t, "", "doctor", "--tls-dir", filepath.Join(pki, "w1"))
	if code != 0 || !strings.Contains(out, "mutual TLS 1.3") || !strings.Contains(out, `"CN=w1,O=braid cluster"`) {
		t.Fatalf("doctor --tls-dir: exit %d:\n%s", code, out)
	}
	if out, _, code := braid(t, "", "doctor", "--tls-dir", dir); code == 0 || !strings.Contains(out, "TLS directory unusable") {
		t.Fatalf("doctor with a directory without certificates: exit %d:\n%s", code, out)
	}

	plain1, plain2 := startWorker(t, nil), startWorker(t, nil)
	tls1, tls2 := startWorker(t, nil, "--tls-dir", filepath.Join(pki, "w1")), startWorker(t, []string{"BRAID_TLS_DIR=" + filepath.Join(pki, "w2")})
	run := func(workers string, extra ...string) (string, string, int) {
		args := append([]string{"run", "-m", tiny, "-p", "Once upon a time", "-n", "24", "--temp", "0", "-t", "1", "--workers", workers}, extra...)
		return braid(t, "", args...)
	}
	for _, split := range []string{"tensor", "layer"} {
		want, errOut, code := run(plain1+","+plain2, "--split", split)
		if code != 0 {
			t.Fatalf("%s over plain TCP: exit %d: %s", split, code, errOut)
		}
		got, errOut, code := run(tls1+","+tls2, "--split", split, "--tls-dir", filepath.Join(pki, "coord"))
		if code != 0 {
			t.Fatalf("%s over TLS: exit %d: %s", split, code, errOut)
		}
		if got != want || want == "" {
			t.Fatalf("%s: TLS gave %q, plain TCP %q", split, got, want)
		}
	}
	for _, c := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"plain coordinator", nil, []string{"requires TLS"}},
		{"another CA", []string{"--tls-dir", filepath.Join(other, "intruder")}, []string{"not signed by this cluster's CA", "bad certificate"}},
		{"no certificate", []string{"--tls-dir", dir}, []string{"ca.crt"}},
	} {
		_, errOut, code := run(tls1, append(c.extra, "--split", "layer", "--wait-workers", "2s")...)
		ok := false
		for _, w := range c.want {
			ok = ok || strings.Contains(errOut, w)
		}
		if code == 0 || !ok {
			t.Fatalf("%s: exit %d, want a refusal containing one of %q:\n%s", c.name, code, c.want, errOut)
		}
		t.Logf("%s: %s", c.name, lastLine(errOut))
		// The worker is still up and serves the cluster's own coordinator.
		if _, errOut, code := run(tls1, "--split", "layer", "--tls-dir", filepath.Join(pki, "coord")); code != 0 {
			t.Fatalf("after the %s: the right coordinator: exit %d: %s", c.name, code, errOut)
		}
	}
	// A TLS coordinator to a plain worker hears why.
	_, errOut, code := run(plain1, "--split", "layer", "--tls-dir", filepath.Join(pki, "coord"), "--wait-workers", "2s")
	if code == 0 || !strings.Contains(errOut, "without --tls-dir") {
		t.Fatalf("TLS coordinator, plain worker: exit %d: %s", code, errOut)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// TestServeHTTPS: braid serve --ssl-key-file/--ssl-cert-file (llama-server's
// names, and its LLAMA_ARG_ variables) serves HTTPS with that certificate;
// a plain HTTP request is answered 400 and the server stays up; one flag
// without the other, or a key of another certificate, is refused at start.
func TestServeHTTPS(t *testing.T) {
	needShared(t, stories)
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	if _, errOut, code := braid(t, "", "certs", pki, "api:127.0.0.1,localhost", "other"); code != 0 {
		t.Fatalf("braid certs: exit %d: %s", code, errOut)
	}
	key, cert := filepath.Join(pki, "api", "node.key"), filepath.Join(pki, "api", "node.crt")
	for _, env := range [][]string{nil, {"LLAMA_ARG_SSL_KEY_FILE=" + key, "LLAMA_ARG_SSL_CERT_FILE=" + cert}} {
		args := []string{"--ssl-key-file", key, "--ssl-cert-file", cert}
		if env != nil {
			args = nil
		}
		url, _ := llamaServe(t, env, args...)
		if !strings.HasPrefix(url, "https://") {
			t.Fatalf("serve logged %q, want an https:// address", url)
		}
		caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		get := func(c *http.Client, u string) (int, string, error) {
			resp, err := c.Get(u)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), nil
		}
		if code, body, err := get(client, url+"/v1/models"); err != nil || code != 200 || !strings.Contains(body, "stories260K") {
			t.Fatalf("GET %s/v1/models over HTTPS: %d %v %s", url, code, err, body)
		}
		plain := "http://" + strings.TrimPrefix(url, "https://")
		if code, body, err := get(&http.Client{Timeout: 10 * time.Second}, plain+"/health"); err != nil || code != 400 || !strings.Contains(body, "HTTPS") {
			t.Fatalf("plain HTTP to the HTTPS server: %d %v %q, want 400 naming HTTPS", code, err, body)
		}
		// A client that does not trust the CA is refused by its own TLS
		// check; the server is still up for the one that does.
		if _, _, err := get(&http.Client{Timeout: 10 * time.Second}, url+"/health"); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("an untrusting client: %v, want a certificate error", err)
		}
		if code, _, err := get(client, url+"/health"); err != nil || code != 200 {
			t.Fatalf("after the bad clients: /health %d %v", code, err)
		}
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--ssl-key-file", key}, 2, "go together"},
		{[]string{"--ssl-cert-file", cert}, 2, "go together"},
		{[]string{"--ssl-key-file", filepath.Join(pki, "other", "node.key"), "--ssl-cert-file", cert}, 1, "private key does not match"},
		{[]string{"--ssl-key-file", key, "--ssl-cert-file", filepath.Join(dir, "missing.crt")}, 1, "missing.crt"},
	} {
		_, errOut, code := braid(t, "", append([]string{"serve", "-m", stories, "--listen", "127.0.0.1:0"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Fatalf("serve %v: exit %d, want %d with %q: %s", c.args, code, c.code, c.want, errOut)
		}
	}
}
