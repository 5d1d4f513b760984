#!/usr/bin/env bash
# Runs every Fuzz target in the module for a short time each (default 3s).
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-3s}"
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' || true)
  for f in $targets; do
    echo "fuzz $pkg $f ($t)"
    go test -run='^$' -fuzz="^${f}\$" -fuzztime="$t" -fuzzminimizetime=100x "$pkg"
  done
done
