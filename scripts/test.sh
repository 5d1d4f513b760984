#!/usr/bin/env bash
# The test command: installs test dependencies (as root), builds, and runs all
# tests. Root-only tests skip unless root; with FIPS_E2E=1 they must run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/deps-boringtun.sh
go build -o bin/fips-go .
export FIPS_GO_BIN="$PWD/bin/fips-go"
go test -count=1 -timeout 20m ./...
