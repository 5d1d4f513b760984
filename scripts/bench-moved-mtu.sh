#!/usr/bin/env bash
# TCP throughput through interfaces that were moved to other network
# namespaces after creation, at several tunnel MTUs (issue 8's set-up): both
# daemons run in namespace R with their UDP sockets on 127.0.0.1 there; their
# interfaces are moved into namespaces A and B, where the MTU is set. Needs
# root, iperf3, wg.
#
#   bash scripts/bench-moved-mtu.sh [seconds] [runs] [impl...]
#
# Prints one row per implementation, MTU and inner IP version: the median
# throughput of the runs, and for fips-go its tx_drop_too_big counter.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-5}"; runs="${2:-3}"; shift 2 || true
impls=("${@:-fips-go wireguard-go}")
[ "$(id -u)" -eq 0 ] || { echo "bench-moved-mtu: needs root" >&2; exit 1; }
bash scripts/deps.sh
mkdir -p bin
export CGO_ENABLED=0 # static, as bench-netns.sh
go build -o bin/fips-go .
go build -o bin/wireguard-go golang.zx2c4.com/wireguard
NR=fmove-r NA=fmove-a NB=fmove-b
cleanup() {
  for n in $NR $NA $NB; do
    ip netns pids $n 2>/dev/null | xargs -r kill 2>/dev/null || true
  done
  sleep 0.3
  for n in $NR $NA $NB; do ip netns del $n 2>/dev/null || true; done
}
trap cleanup EXIT

setup() { # impl
  cleanup
  ip netns add $NR; ip netns add $NA; ip netns add $NB
  ip -n $NR link set lo up; ip -n $NA link set lo up; ip -n $NB link set lo up
  local ka kb
  ka=$(bin/fips-go genkey); kb=$(bin/fips-go genkey)
  ip netns exec $NR env LOG_LEVEL=error "bin/$1" fmwa
  ip netns exec $NR env LOG_LEVEL=error "bin/$1" fmwb
  ip netns exec $NR wg set fmwa listen-port 51901 private-key <(echo "$ka") \
    peer "$(echo "$kb" | bin/fips-go pubkey)" endpoint 127.0.0.1:51902 allowed-ips 10.78.0.2/32,fd78::2/128
  ip netns exec $NR wg set fmwb listen-port 51902 private-key <(echo "$kb") \
    peer "$(echo "$ka" | bin/fips-go pubkey)" endpoint 127.0.0.1:51901 allowed-ips 10.78.0.1/32,fd78::1/128
  ip -n $NR link set fmwa netns $NA; ip -n $NR link set fmwb netns $NB
  ip -n $NA addr add 10.78.0.1/24 dev fmwa; ip -n $NB addr add 10.78.0.2/24 dev fmwb
  ip -n $NA addr add fd78::1/64 dev fmwa nodad; ip -n $NB addr add fd78::2/64 dev fmwb nodad
  ip -n $NA link set fmwa up; ip -n $NB link set fmwb up
  ip netns exec $NA ping -c 3 -i 0.2 -W 2 10.78.0.2 >/dev/null
}

setmtu() {
  ip -n $NA link set fmwa mtu "$1"; ip -n $NB link set fmwb mtu "$1"
  sleep 1.5 # an interface in another namespace is polled once a second
}

gbps() { # dst
  ip netns exec $NB iperf3 -s -1 -D -I /tmp/fmove-iperf.pid >/dev/null
  sleep 0.3
  ip netns exec $NA iperf3 -c "$1" -t "$secs" -J > /tmp/fmove.json || true
  python3 -c 'import json;d=json.load(open("/tmp/fmove.json"));print("%.2f"%(d["end"]["sum_received"]["bits_per_second"]/1e9))' 2>/dev/null || echo 0
}

median() { tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

echo "| impl         | MTU   | inner | throughput (median of $runs) | runs | tx_drop_too_big |"
for impl in ${impls[@]}; do
  setup "$impl"
  for mtu in 1420 2000 9000 34736; do
    setmtu "$mtu"
    for dst in 10.78.0.2 fd78::2; do
      all=""
      for _ in $(seq "$runs"); do all="$all $(gbps $dst)"; done
      drops=-
      if [ "$impl" = fips-go ]; then
        drops=$(ip netns exec $NR bin/fips-go show fmwa | awk '/tx_drop_too_big/{print $2}')
        drops=${drops:-0}
      fi
      v=4; [[ $dst == *:* ]] && v=6
      printf '| %-12s | %5s | IPv%s  | %6s Gbit/s | %s | %s |\n' "$impl" "$mtu" "$v" "$(echo $all | median)" "$all" "$drops"
    done
  done
done
