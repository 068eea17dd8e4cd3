#!/usr/bin/env bash
# The whole test suite: vet, the Go tests on this machine (the web page's
# in a headless browser among them), the packages
# that run goroutines of their own again under the race detector, and the
# arm64 kernel tests cross-compiled and run under qemu-user.
set -euo pipefail
cd "$(dirname "$0")/.."

go vet ./...
go test -count=1 ./...
# The web page in headless Chromium: a module of its own, so that chromedp
# is no dependency of braid (it skips without a Chromium on PATH unless
# BRAID_REQUIRE_BROWSER=1, which .ci/run sets).
(cd tests/browser && go vet ./... && go test -count=1 ./...)
# The deployment files (deploy/): a module of its own, so that the
# Kubernetes API types are no dependency of braid. Without systemd-analyze
# the units' verify skips, unless BRAID_REQUIRE_SYSTEMD=1 (.ci/run sets it).
(cd deploy/validate && go vet ./... && go test -count=1 ./...)

# The race detector needs cgo, so a C compiler (apt-get install gcc).
# -short: this run looks for interleavings, which the short cases reach as
# well (one shared model per architecture, every split), and the run above
# has every case; the race detector slows the model tests most (on 2 cores
# shared with other jobs this run took 3-6 minutes of an 8-12 minute suite).
# hub is here for its parallel ranged downloads, discover for its waits and
# its in-process DNS server.
if ! command -v "$(go env CC)" >/dev/null 2>&1; then
	echo "FAIL: no C compiler ($(go env CC)) on PATH; go test -race needs cgo (apt-get install gcc)" >&2
	exit 1
fi
echo "race detector over the concurrent packages:"
CGO_ENABLED=1 go test -count=1 -race -short ./internal/dist/... ./internal/cluster ./internal/engine ./internal/server ./internal/model ./internal/hub ./internal/discover/...

qemu=""
for q in qemu-aarch64-static qemu-aarch64; do
	if command -v "$q" >/dev/null 2>&1; then qemu=$q; break; fi
done
if [ -z "$qemu" ]; then
	echo "FAIL: no qemu-aarch64(-static) on PATH; the arm64 kernel tests need it (apt-get install qemu-user-static)" >&2
	exit 1
fi
echo "arm64 kernel tests under $qemu:"
# -short keeps the emulated run to the correctness cases.
GOARCH=arm64 go test -count=1 -short -exec "$qemu" ./internal/kernels/... ./internal/quant/...
