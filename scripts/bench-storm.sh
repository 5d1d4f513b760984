#!/usr/bin/env bash
# The handshake storm, side by side: a gateway in a fresh network namespace
# (a restart) with N configured peers (each one /32, no endpoint), and
# tests/peersim in another namespace simulating N peers that all initiate
# within one second from a /16 of source addresses, answer cookie replies
# as real peers do (MAC2 on the next retransmission, 5 s later), and send
# one echo request each through the tunnel once they have a session. For
# fips-go and wireguard-go (built from go.mod) it prints the time until
# 99% and 100% of peers had a session, handshakes per CPU-second of the
# gateway, cookie replies, retransmissions, RSS per session, threads, and
# the gateway's CPU while idle with every session up. Needs root and wg.
#
#   sudo bash scripts/bench-storm.sh [peers, default 10000] [configured, default peers] [runs, default 1]
#
# FIPS_STORM_ONLY=fips-go keeps one row; FIPS_STORM_ONLY=wireguard-go-ts
# measures Tailscale's fork (bin/wireguard-go-ts, or FIPS_STORM_TS_BIN),
# which learns no endpoint from a handshake and so cannot serve this setup.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench-storm: needs root" >&2; exit 1; }
command -v wg >/dev/null || { echo "bench-storm: needs wg (scripts/deps.sh)" >&2; exit 1; }
mkdir -p bin
CGO_ENABLED=0 go build -o bin/fips-go .
FIPS_STORM=1 FIPS_GO_BIN="$PWD/bin/fips-go" FIPS_STORM_PEERS="${1:-10000}" \
  FIPS_STORM_CONFIGURED="${2:-${1:-10000}}" FIPS_STORM_RUNS="${3:-1}" \
  go test -count=1 -timeout 60m -run '^TestStormBenchmark$' -v ./tests/storm/ 2>&1 |
  grep -v '^ERROR: ' # wireguard-go logs every response it cannot send
