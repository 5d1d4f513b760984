#!/usr/bin/env bash
# Configured peers at gateway scale, side by side: for each peer count and
# implementation, a daemon in a fresh network namespace is given N peers
# (each one /32, no endpoint, as a server's road-warrior clients are
# configured) with `wg setconf`, then dumped, changed in one peer with
# `wg syncconf`, and shown with `fips-go show`. Needs root and wg.
#
#   bash scripts/bench-peers.sh [counts] [impl...]
#   bash scripts/bench-peers.sh 10000,100000 fips-go wireguard-go
#
# Prints per case the wall time of each command, and the daemon's RSS above
# what it had with no peers, per peer. Impls as in scripts/bench-netns.sh.
# wireguard-go refuses more than 65,536 peers; its row then says so.
set -euo pipefail
cd "$(dirname "$0")/.."
counts="${1:-10000,100000}"; shift || true
impls=("$@"); [ ${#impls[@]} -gt 0 ] || impls=(fips-go wireguard-go)
[ "$(id -u)" -eq 0 ] || { echo "bench-peers: needs root" >&2; exit 1; }
command -v wg >/dev/null || { echo "bench-peers: needs wg (scripts/deps.sh)" >&2; exit 1; }
mkdir -p bin
export CGO_ENABLED=0
go build -o bin/fips-go .
go build -o bin/wireguard-go golang.zx2c4.com/wireguard
NS=fpeers
work=$(mktemp -d /tmp/fpeers.XXXXXX)
cleanup() { # stop the daemon and wait until it is gone with its socket
  local pids
  pids=$(ip netns pids $NS 2>/dev/null || true)
  [ -n "$pids" ] && kill $pids 2>/dev/null || true
  for _ in $(seq 50); do
    [ -e /var/run/wireguard/fpw0.sock ] || break
    sleep 0.1
  done
  ip netns del $NS 2>/dev/null || true
}
trap 'cleanup; rm -rf "$work"' EXIT

# conf N FILE [CHANGED]: a wg config with N peers of random keys and one
# /32 each from 10.0.0.0/8; CHANGED gives peer 0 a second allowed IP.
conf() {
  python3 - "$@" <<'PY'
import base64, random, sys
n, path = int(sys.argv[1]), sys.argv[2]
changed = len(sys.argv) > 3
rnd = random.Random(1)  # the same keys, ours included, for the changed copy
with open(path, "w") as f:
    f.write("[Interface]\nPrivateKey = %s\nListenPort = 51820\n" % base64.b64encode(rnd.getrandbits(256).to_bytes(32, "little")).decode())
    for i in range(n):
        key = base64.b64encode(rnd.getrandbits(256).to_bytes(32, "little")).decode()
        ip = "10.%d.%d.%d/32" % ((i >> 16) & 255, (i >> 8) & 255, i & 255)
        if changed and i == 0:
            ip += ", 172.16.0.1/32"
        f.write("\n[Peer]\nPublicKey = %s\nAllowedIPs = %s\n" % (key, ip))
PY
}

secs() { # command...: wall seconds; fails when the command does
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null || return 1
  t1=$(date +%s.%N)
  python3 -c "print('%.2f' % ($t1 - $t0))"
}

rss_kib() { awk '/VmRSS/{print $2}' /proc/$1/status; }

if grep -q avx512ifma /proc/cpuinfo; then cpu="AVX-512 IFMA"; else cpu="no AVX-512 IFMA"; fi
echo "bench-peers: $(nproc) CPUs, $cpu, $(uname -r)"
echo "| impl | peers | setconf | show dump | syncconf (1 peer) | fips-go show | RSS above empty | per peer |"
echo "|---|---|---|---|---|---|---|---|"
IFS=, read -ra ns <<< "$counts"
for n in "${ns[@]}"; do
  conf "$n" "$work/a.conf"
  conf "$n" "$work/b.conf" changed
  for impl in "${impls[@]}"; do
    cleanup
    ip netns add $NS
    ip netns exec $NS env LOG_LEVEL=error "bin/$impl" fpw0 >/dev/null 2>&1 ||
      { echo "bench-peers: $impl did not start" >&2; exit 1; }
    pid=$(ip netns pids $NS | head -1)
    sleep 0.5
    base=$(rss_kib "$pid")
    if ! set_s=$(secs ip netns exec $NS wg setconf fpw0 "$work/a.conf" 2>/dev/null); then
      echo "| $impl | $n | refused | | | | | |"
      continue
    fi
    got=$(ip netns exec $NS wg show fpw0 peers | wc -l)
    [ "$got" -eq "$n" ] || { echo "bench-peers: $impl has $got peers, want $n" >&2; exit 1; }
    dump_s=$(secs ip netns exec $NS wg show fpw0 dump)
    sync_s=$(secs ip netns exec $NS wg syncconf fpw0 "$work/b.conf")
    aips=$(ip netns exec $NS wg show fpw0 allowed-ips)
    [[ "$aips" == *172.16.0.1/32* ]] || { echo "bench-peers: $impl: syncconf did not take" >&2; exit 1; }
    show_s=$(secs ip netns exec $NS bin/fips-go show fpw0)
    # RSS once the commands' garbage had time to go back to the system
    # (Go's scavenger returns freed heap within seconds).
    sleep 10
    now=$(rss_kib "$pid")
    per=$(python3 -c "print('%.2f KiB' % (($now - $base) / $n))")
    printf '| %s | %d | %s s | %s s | %s s | %s s | %s MiB | %s |\n' "$impl" "$n" "$set_s" "$dump_s" "$sync_s" "$show_s" \
      "$(python3 -c "print('%.1f' % (($now - $base) / 1024))")" "$per"
  done
done
