#!/usr/bin/env bash
# TCP throughput through a path narrower than the tunnel: client A - router
# R - server B, R's link towards B at 1280 bytes, fips-go at A, fips-go or
# wireguard-go at B. Cases: the tunnel MTU set right by hand (1200), the
# default tunnel MTU (1420) with the router's ICMP passing, and with it
# dropped (iptables on R dropping fragmentation-needed / packet-too-big);
# IPv4 and IPv6 underlay; for each far side. Each row: iperf3 Mbit/s A->B
# and B->A, median of the runs, and the share of the hand-set row; then
# for each far side and underlay, how long a transfer takes to recover
# when the hop shrinks from 1500 to 1280 bytes mid-transfer. Needs root.
#
#   bash scripts/bench-pmtu.sh [seconds] [runs]
#
# FAR="fips-go wireguard-go" picks the far sides (wireguard-go built from
# go.mod into bin/wireguard-go, as the other benches do); FIPS_GO_PATH_PROBES is
# passed to fips-go as it is set. PMTU_PREFIX names the namespaces and
# interfaces, so that two runs on one machine do not meet; PMTU_V6=0 or 1
# runs only the IPv4 or the IPv6 underlay.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-5}"; runs="${2:-3}"
[ "$(id -u)" -eq 0 ] || { echo "bench-pmtu: needs root" >&2; exit 1; }
bash scripts/deps.sh
mkdir -p bin
export CGO_ENABLED=0
go build -o bin/fips-go .
case " ${FAR:-wireguard-go} " in *" wireguard-go "*) go build -o bin/wireguard-go golang.zx2c4.com/wireguard ;; esac
far_sides="${FAR:-fips-go wireguard-go}"
pfx="${PMTU_PREFIX:-fpmtu}"
NR=$pfx-r NA=$pfx-a NB=$pfx-b
WA=${pfx:0:8}wa WB=${pfx:0:8}wb
cleanup() {
  for n in $NR $NA $NB; do
    ip netns pids $n 2>/dev/null | xargs -r kill 2>/dev/null || true
  done
  sleep 0.3
  for n in $NR $NA $NB; do ip netns del $n 2>/dev/null || true; done
}
trap cleanup EXIT

setup() { # v6 (0/1) tunnel-mtu drop-icmp (0/1) far-impl [far-link-mtu]
  local v6=$1 tmtu=$2 drop=$3 far=$4 fmtu=${5:-1280}
  cleanup
  for n in $NR $NA $NB; do ip netns add $n; ip -n $n link set lo up; done
  ip link add fpa netns $NA type veth peer name fpra netns $NR
  ip link add fpb netns $NB type veth peer name fprb netns $NR
  ip -n $NA addr add 10.91.1.1/24 dev fpa; ip -n $NR addr add 10.91.1.2/24 dev fpra
  ip -n $NR addr add 10.91.2.1/24 dev fprb; ip -n $NB addr add 10.91.2.2/24 dev fpb
  ip -n $NA addr add fd91:1::1/64 dev fpa nodad; ip -n $NR addr add fd91:1::2/64 dev fpra nodad
  ip -n $NR addr add fd91:2::1/64 dev fprb nodad; ip -n $NB addr add fd91:2::2/64 dev fpb nodad
  ip -n $NR link set fprb mtu "$fmtu"; ip -n $NB link set fpb mtu "$fmtu"
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
  ip netns exec $NA env LOG_LEVEL=error bin/fips-go $WA
  ip netns exec $NB env LOG_LEVEL=error "bin/$far" $WB 2>"/tmp/$pfx-far.log"
  # fips-go's set speaks the UAPI, which wireguard-go's socket answers too.
  ip netns exec $NA bin/fips-go set $WA listen-port 51911 private-key <(echo "$ka") \
    peer "$(echo "$kb" | bin/fips-go pubkey)" endpoint "$epb:51912" allowed-ips 10.79.0.2/32
  ip netns exec $NB bin/fips-go set $WB listen-port 51912 private-key <(echo "$kb") \
    peer "$(echo "$ka" | bin/fips-go pubkey)" endpoint "$epa:51911" allowed-ips 10.79.0.1/32
  ip -n $NA addr add 10.79.0.1/24 dev $WA; ip -n $NB addr add 10.79.0.2/24 dev $WB
  ip -n $NA link set $WA mtu "$tmtu" up; ip -n $NB link set $WB mtu "$tmtu" up
  ip netns exec $NA ping -c 3 -i 0.2 -W 2 10.79.0.2 >/dev/null
}

mbit() { # client-ns server-ns server-addr
  ip netns exec "$2" iperf3 -s -1 -D -I "/tmp/$pfx-iperf.pid" >/dev/null
  sleep 0.3
  # A stalled transfer reads 0; --connect-timeout and timeout bound it.
  timeout $((secs + 20)) ip netns exec "$1" iperf3 -c "$3" -t "$secs" --connect-timeout 5000 -J > "/tmp/$pfx.json" || true
  python3 -c 'import json,sys;d=json.load(open(sys.argv[1]));print("%.0f"%(d["end"]["sum_received"]["bits_per_second"]/1e6))' "/tmp/$pfx.json" 2>/dev/null || echo 0
  ip netns exec "$2" pkill -F "/tmp/$pfx-iperf.pid" 2>/dev/null || true
}

# recovery: a 15 s transfer over a hop of 1500 bytes that shrinks to 1280
# at its fifth second (ICMP dropped): the seconds from the shrink to the
# end of the first half-second interval that carries at least 80% of the
# hand-set rate ($4), "never" if none does.
recovery() { # client-ns server-ns server-addr hand-set-mbit
  ip netns exec "$2" iperf3 -s -1 -D -I "/tmp/$pfx-iperf.pid" >/dev/null
  sleep 0.3
  (sleep 5; ip -n $NR link set fprb mtu 1280; ip -n $NB link set fpb mtu 1280) &
  timeout 40 ip netns exec "$1" iperf3 -c "$3" -t 15 -i 0.5 --connect-timeout 5000 -J > "/tmp/$pfx.json" || true
  wait
  python3 -c '
import json,sys
d=json.load(open(sys.argv[1])); ref=float(sys.argv[2])*1e6*0.8
for iv in d["intervals"]:
    s=iv["sum"]
    if s["start"]>=5 and s["bits_per_second"]>=ref:
        print("%.1f s"%(s["end"]-5)); break
else: print("never")' "/tmp/$pfx.json" "$4" 2>/dev/null || echo never
  ip netns exec "$2" pkill -F "/tmp/$pfx-iperf.pid" 2>/dev/null || true
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

pct() { [ "$2" -gt 0 ] && echo "$(( 100 * $1 / $2 ))%" || echo "-"; }

echo "| far side | underlay | case | A->B Mbit/s | B->A Mbit/s | runs A->B | runs B->A |"
echo "|---|---|---|---|---|---|---|"
for far in $far_sides; do
  [ -x "bin/$far" ] || { echo "bench-pmtu: no bin/$far" >&2; exit 1; }
  for v6 in ${PMTU_V6:-0 1}; do
    hab=0; hba=0
    for c in "1200 0 MTU 1200 by hand" "1420 0 default, ICMP passes" "1420 1 default, ICMP dropped"; do
      set -- $c; mtu=$1; drop=$2; shift 2; name="$*"
      setup $v6 "$mtu" "$drop" "$far"
      ab=""; ba=""
      for _ in $(seq "$runs"); do
        ab="$ab $(mbit $NA $NB 10.79.0.2)"; ba="$ba $(mbit $NB $NA 10.79.0.1)"
      done
      fam=IPv4; [ $v6 = 1 ] && fam=IPv6
      mab=$(echo $ab | median); mba=$(echo $ba | median)
      if [ "$mtu" = 1200 ]; then hab=$mab; hba=$mba; share=""; else
        share=" ($(pct "$mab" "$hab") / $(pct "$mba" "$hba") of by hand)"; fi
      printf '| %s | %s | %s%s | %s | %s | %s | %s |\n' "$far" $fam "$name" "$share" "$mab" "$mba" "$ab" "$ba"
    done
    rab=""; rba="" # each on fresh daemons, which know nothing of the path
    for _ in $(seq "$runs"); do
      setup $v6 1420 1 "$far" 1500; rab="$rab, $(recovery $NA $NB 10.79.0.2 "$hab")"
      setup $v6 1420 1 "$far" 1500; rba="$rba, $(recovery $NB $NA 10.79.0.1 "$hba")"
    done
    printf '| %s | %s | hop shrinks mid-transfer, ICMP dropped: recovered to 80%% after | | | %s | %s |\n' "$far" $fam "${rab#, }" "${rba#, }"
  done
done
