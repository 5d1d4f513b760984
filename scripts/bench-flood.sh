#!/usr/bin/env bash
# The handshake-flood benchmark: a victim and a legitimate peer in two
# network namespaces, an attacker in a third sending initiations with a
# valid MAC1 from spoofed sources at the rate one core allows. For fips-go,
# wireguard-go (built from go.mod) and Tailscale's fork (bin/wireguard-go-ts,
# when present) it prints TCP throughput, ping RTT, fresh handshake time,
# victim CPU and peak RSS with no flood, with the flood aimed at a closed
# port (the baseline), and with three floods at the tunnel. Needs root.
#
#   sudo bash scripts/bench-flood.sh [seconds of iperf3 per row, default 10]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
[ "$(id -u)" -eq 0 ] || { echo "bench-flood: needs root" >&2; exit 1; }
bash scripts/deps.sh
FIPS_FLOOD=1 FIPS_FLOOD_SECS="$secs" go test -count=1 -timeout 30m \
  -run '^TestFloodBenchmark$' -v ./tests/flood/
