#!/usr/bin/env bash
# The whole test suite: vet, the Go tests on this machine, and the arm64
# kernel tests cross-compiled and run under qemu-user.
set -euo pipefail
cd "$(dirname "$0")/.."

go vet ./...
go test -count=1 ./...

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
