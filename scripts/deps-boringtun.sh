#!/usr/bin/env bash
# Builds boringtun-cli, the interop tests' one peer not written in Go, from
# crates.io with the lock file it was published with, and copies it to
# bin/boringtun-cli. The build (1-3 minutes on 2 cores) is kept outside
# the work tree, so a fresh clone on the same machine copies it instead of
# building again. Without cargo, or if the build fails, it says so and the
# tests against boringtun skip (or fail, with FIPS_E2E=1).
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.7.1
if bin/boringtun-cli --version 2>/dev/null | grep -q " $version\$"; then
  exit 0
fi
cargo=$(command -v cargo || true)
if [ -z "$cargo" ] && [ -x "$HOME/.cargo/bin/cargo" ]; then
  cargo="$HOME/.cargo/bin/cargo"
fi
root="${XDG_CACHE_HOME:-$HOME/.cache}/fips-go/boringtun-$version"
if [ ! -x "$root/bin/boringtun-cli" ]; then
  if [ -z "$cargo" ]; then
    echo "deps-boringtun: no cargo; the interop tests against boringtun will skip (fail with FIPS_E2E=1)" >&2
    exit 0
  fi
  echo "deps-boringtun: building boringtun-cli $version with cargo (once per machine)" >&2
  if ! "$cargo" install --quiet --locked --version "$version" --root "$root" boringtun-cli; then
    echo "deps-boringtun: the build failed; the interop tests against boringtun will skip (fail with FIPS_E2E=1)" >&2
    exit 0
  fi
fi
mkdir -p bin
cp "$root/bin/boringtun-cli" bin/boringtun-cli
