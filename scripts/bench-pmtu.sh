#!/usr/bin/env bash
# TCP throughput through a path narrower than the tunnel: client A - router
# R - server B, R's link towards B at 1280 bytes, fips-go at both ends.
# Cases: the tunnel MTU set right by hand (1200), the default tunnel MTU
# (1420) with the router's ICMP passing, and with it dropped (iptables on R
# dropping fragmentation-needed / packet-too-big); IPv4 and IPv6 underlay.
# Each row: iperf3 Mbit/s A->B and B->A, median of the runs. Needs root.
#
#   bash scripts/bench-pmtu.sh [seconds] [runs]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-5}"; runs="${2:-3}"
[ "$(id -u)" -eq 0 ] || { echo "bench-pmtu: needs root" >&2; exit 1; }
bash scripts/deps.sh
mkdir -p bin
export CGO_ENABLED=0
go build -o bin/fips-go .
NR=fpmtu-r NA=fpmtu-a NB=fpmtu-b
cleanup() {
  for n in $NR $NA $NB; do
    ip netns pids $n 2>/dev/null | xargs -r kill 2>/dev/null || true
  done
  sleep 0.3
  for n in $NR $NA $NB; do ip netns del $n 2>/dev/null || true; done
}
trap cleanup EXIT

setup() { # v6 (0/1) tunnel-mtu drop-icmp (0/1)
  local v6=$1 tmtu=$2 drop=$3
  cleanup
  for n in $NR $NA $NB; do ip netns add $n; ip -n $n link set lo up; done
  ip link add fpa netns $NA type veth peer name fpra netns $NR
  ip link add fpb netns $NB type veth peer name fprb netns $NR
  ip -n $NA addr add 10.91.1.1/24 dev fpa; ip -n $NR addr add 10.91.1.2/24 dev fpra
  ip -n $NR addr add 10.91.2.1/24 dev fprb; ip -n $NB addr add 10.91.2.2/24 dev fpb
  ip -n $NA addr add fd91:1::1/64 dev fpa nodad; ip -n $NR addr add fd91:1::2/64 dev fpra nodad
  ip -n $NR addr add fd91:2::1/64 dev fprb nodad; ip -n $NB addr add fd91:2::2/64 dev fpb nodad
  ip -n $NR link set fprb mtu 1280; ip -n $NB link set fpb mtu 1280
  ip -n $NA link set fpa up; ip -n $NR link set fpra up
  ip -n $NR link set fprb up; ip -n $NB link set fpb up
  ip netns exec $NR sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
  ip -n $NA route add 10.91.2.0/24 via 10.91.1.2; ip -n $NB route add 10.91.1.0/24 via 10.91.2.1
  ip -n $NA -6 route add fd91:2::/64 via fd91:1::2; ip -n $NB -6 route add fd91:1::/64 via fd91:2::1
  if [ "$drop" = 1 ]; then
    for c in FORWARD OUTPUT; do
      ip netns exec $NR iptables -A $c -p icmp --icmp-type fragmentation-needed -j DROP
      ip netns exec $NR ip6tables -A $c -p icmpv6 --icmpv6-type packet-too-big -j DROP
    done
  fi
  local ka kb epa epb
  ka=$(bin/fips-go genkey); kb=$(bin/fips-go genkey)
  epa=10.91.1.1; epb=10.91.2.2
  [ "$v6" = 1 ] && { epa='[fd91:1::1]'; epb='[fd91:2::2]'; }
  ip netns exec $NA env LOG_LEVEL=error bin/fips-go fpwa
  ip netns exec $NB env LOG_LEVEL=error bin/fips-go fpwb
  ip netns exec $NA bin/fips-go set fpwa listen-port 51911 private-key <(echo "$ka") \
    peer "$(echo "$kb" | bin/fips-go pubkey)" endpoint "$epb:51912" allowed-ips 10.79.0.2/32
  ip netns exec $NB bin/fips-go set fpwb listen-port 51912 private-key <(echo "$kb") \
    peer "$(echo "$ka" | bin/fips-go pubkey)" endpoint "$epa:51911" allowed-ips 10.79.0.1/32
  ip -n $NA addr add 10.79.0.1/24 dev fpwa; ip -n $NB addr add 10.79.0.2/24 dev fpwb
  ip -n $NA link set fpwa mtu "$tmtu" up; ip -n $NB link set fpwb mtu "$tmtu" up
  ip netns exec $NA ping -c 3 -i 0.2 -W 2 10.79.0.2 >/dev/null
}

mbit() { # client-ns server-ns server-addr
  ip netns exec "$2" iperf3 -s -1 -D -I /tmp/fpmtu-iperf.pid >/dev/null
  sleep 0.3
  ip netns exec "$1" iperf3 -c "$3" -t "$secs" -J > /tmp/fpmtu.json || true
  python3 -c 'import json;d=json.load(open("/tmp/fpmtu.json"));print("%.0f"%(d["end"]["sum_received"]["bits_per_second"]/1e6))' 2>/dev/null || echo 0
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

echo "| underlay | case | A->B Mbit/s | B->A Mbit/s | runs A->B | runs B->A |"
echo "|---|---|---|---|---|---|"
for v6 in 0 1; do
  for c in "1200 0 MTU 1200 by hand" "1420 0 default, ICMP passes" "1420 1 default, ICMP dropped"; do
    set -- $c; mtu=$1; drop=$2; shift 2; name="$*"
    setup $v6 "$mtu" "$drop"
    ab=""; ba=""
    for _ in $(seq "$runs"); do
      ab="$ab $(mbit $NA $NB 10.79.0.2)"; ba="$ba $(mbit $NB $NA 10.79.0.1)"
    done
    fam=IPv4; [ $v6 = 1 ] && fam=IPv6
    printf '| %s | %s | %s | %s | %s | %s |\n' $fam "$name" "$(echo $ab | median)" "$(echo $ba | median)" "$ab" "$ba"
  done
done
