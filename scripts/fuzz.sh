#!/usr/bin/env bash
# Runs every Fuzz target in the module for a short budget each. The budget
# is a count of executions (default 20000x), not a duration: with a duration
# Go 1.26's fuzz coordinator can report a spurious "context deadline
# exceeded" on a loaded machine (golang/go#75804, fixed in Go 1.27).
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-20000x}"
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' || true)
  for f in $targets; do
    echo "fuzz $pkg $f ($t)"
    go test -run='^$' -fuzz="^${f}\$" -fuzztime="$t" -fuzzminimizetime=100x "$pkg"
  done
done
