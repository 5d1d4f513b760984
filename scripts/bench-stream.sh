#!/usr/bin/env bash
# TCP throughput through the tunnel over each transport a peer can use:
# client A - router R - server B, fips-go at both ends, iperf3 A->B and
# B->A through the tunnel. Cases: plain UDP; the stream transport in
# Mullvad's TCP framing (R drops all UDP; B listens with tcp-listen on, A's
# peer set to transport tcp); TLS the same way when the binary accepts
# `transport tls` (else the row says "pending"); each on a clean path and
# with 1% of R's forwarded packets dropped at random, both directions
# (iptables statistic: the kernel here has no netem). Each row: the
# medians over the rounds, each round's figures, the inner TCP's
# retransmitted segments (iperf3's sender, per 1,000 sent) and the peak
# RSS of each side's fips-go worker (the privilege-separated daemon's
# monitor beside it adds a constant 11 MiB or so) and the frames each
# side's stream dropped for a full send queue (stream_tx_queue_drops),
# both from the last round.
#
# Then the switch-back time: A's peer set to auto with UDP blocked at R
# falls back to the stream; R then passes UDP again, and the time until A
# shows the peer back on UDP is measured, with a ping a second keeping
# the session busy (the return waits for the next handshake attempt).
#
#   bash scripts/bench-stream.sh [seconds] [rounds] [cases] [paths]
#
# cases: any of udp tcp tls switch, comma-separated (default all); paths:
# clean, loss or both (default clean,loss). Needs root, iperf3, iptables,
# wg.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"; runs="${2:-3}"; cases="${3:-udp,tcp,tls,switch}"
paths="${4:-clean,loss}"
[ "$(id -u)" -eq 0 ] || { echo "bench-stream: needs root" >&2; exit 1; }
bash scripts/deps.sh
mkdir -p bin
export CGO_ENABLED=0
go build -o bin/fips-go .
NR=fstr-r NA=fstr-a NB=fstr-b
IA=fstwa IB=fstwb
tmp=$(mktemp -d /tmp/fstream.XXXXXX)
cleanup() {
  for n in $NR $NA $NB; do
    ip netns pids $n 2>/dev/null | xargs -r kill 2>/dev/null || true
  done
  sleep 0.3
  for n in $NR $NA $NB; do ip netns del $n 2>/dev/null || true; done
}
trap 'cleanup; rm -rf "$tmp"' EXIT
has() { [[ ",$cases," == *",$1,"* ]]; }

# lab: three namespaces, routed, both ends' tunnels configured for UDP.
lab() {
  cleanup
  for n in $NR $NA $NB; do ip netns add $n; ip -n $n link set lo up; done
  ip link add fsa netns $NA type veth peer name fsra netns $NR
  ip link add fsb netns $NB type veth peer name fsrb netns $NR
  ip -n $NA addr add 10.92.1.1/24 dev fsa; ip -n $NR addr add 10.92.1.2/24 dev fsra
  ip -n $NR addr add 10.92.2.1/24 dev fsrb; ip -n $NB addr add 10.92.2.2/24 dev fsb
  for l in "$NA fsa" "$NR fsra" "$NR fsrb" "$NB fsb"; do set -- $l; ip -n $1 link set $2 up; done
  ip netns exec $NR sysctl -qw net.ipv4.ip_forward=1
  ip -n $NA route add 10.92.2.0/24 via 10.92.1.2; ip -n $NB route add 10.92.1.0/24 via 10.92.2.1
  KA=$(bin/fips-go genkey); KB=$(bin/fips-go genkey)
  PUBA=$(echo "$KA" | bin/fips-go pubkey); PUBB=$(echo "$KB" | bin/fips-go pubkey)
  ip netns exec $NA env LOG_LEVEL=error bin/fips-go $IA
  ip netns exec $NB env LOG_LEVEL=error bin/fips-go $IB
  # Only A knows B's endpoint, as a client behind a network that blocks
  # UDP would: B answers wherever A comes from.
  ip netns exec $NA bin/fips-go set $IA listen-port 51921 private-key <(echo "$KA") \
    peer "$PUBB" endpoint 10.92.2.2:51922 allowed-ips 10.78.0.2/32
  ip netns exec $NB bin/fips-go set $IB listen-port 51922 private-key <(echo "$KB") \
    peer "$PUBA" allowed-ips 10.78.0.1/32
  ip -n $NA addr add 10.78.0.1/24 dev $IA; ip -n $NB addr add 10.78.0.2/24 dev $IB
  ip -n $NA link set $IA mtu 1420 up; ip -n $NB link set $IB mtu 1420 up
}

block_udp() { ip netns exec $NR iptables -"${1:-A}" FORWARD -p udp -j DROP; }
lossy() { ip netns exec $NR iptables -A FORWARD -m statistic --mode random --probability 0.01 -j DROP; }

# transport: put A's peer on t (udp, tcp, tls); fails when the binary
# does not know t.
transport() {
  [ "$1" = udp ] && return 0
  block_udp
  ip netns exec $NB bin/fips-go set $IB tcp-listen on >/dev/null 2>&1 &&
    ip netns exec $NA bin/fips-go set $IA peer "$PUBB" transport "$1" >/dev/null 2>&1
}

up() { ip netns exec $NA ping -c 1 -w 15 10.78.0.2 >/dev/null; }

# The fips-go worker of a namespace: the process that runs the device and
# parses the network (with privilege separation, the child of a small
# root monitor whose RSS does not depend on the traffic; otherwise the
# one fips-go process), not the iperf3 running beside it.
worker() {
  local p exe all=() w=""
  exe=$(realpath bin/fips-go)
  for p in $(ip netns pids "$1"); do [ "$(readlink /proc/$p/exe 2>/dev/null)" = "$exe" ] && all+=($p); done
  for p in "${all[@]}"; do
    w=$p
    [[ " ${all[*]} " == *" $(awk '/^PPid/{print $2}' /proc/$p/status) "* ]] && break
  done
  echo "$w"
}
hwm_mib() { local p; p=$(worker "$1"); [ -n "$p" ] && awk '/VmHWM/{printf "%.1f", $2 / 1024}' /proc/$p/status || echo "-"; }

# iperf client-ns server-ns server-addr: "Mbit/s retransmits-per-1000".
iperf() {
  ip netns exec "$2" iperf3 -s -1 -D -I $tmp/iperf.pid >/dev/null
  sleep 0.3
  ip netns exec "$1" timeout $((secs + 30)) iperf3 -c "$3" -t "$secs" -J > $tmp/iperf.json 2>/dev/null || true
  kill "$(cat $tmp/iperf.pid 2>/dev/null)" 2>/dev/null || true
  python3 - $tmp/iperf.json <<'EOF' 2>/dev/null || echo "0 0"
import json, sys
d = json.load(open(sys.argv[1]))["end"]
e = d["sum_sent"]
print("%.0f %.1f" % (d["sum_received"]["bits_per_second"] / 1e6, 1000 * e.get("retransmits", 0) / max(1, e["bytes"] / 1368)))
EOF
}

# counter ns iface name: one of fips-go's counters (0 when not shown).
counter() { ip netns exec "$1" bin/fips-go show "$2" | awk -v k="$3:" '$1 == k {v = $2} END {print v + 0}'; }

median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END{print (NR ? a[int((NR+1)/2)] : "-")}'; }

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, AVX-512 IFMA: $(grep -q avx512ifma /proc/cpuinfo && echo yes || echo no); $secs s x $runs rounds"
echo "| transport | path | A->B Mbit/s | B->A Mbit/s | runs A->B | runs B->A | retrans/1000 A->B | B->A | worker RSS A / B MiB | queue drops A / B |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for t in udp tcp tls; do
  has $t || continue
  for loss in 0 1; do
    path=clean; [ $loss = 1 ] && path="1% loss"
    [ $loss = 1 ] && [[ ",$paths," != *",loss,"* ]] && continue
    [ $loss = 0 ] && [[ ",$paths," != *",clean,"* ]] && continue
    ab=""; ba=""; rab=""; rba=""; rss="-"; qd="-"; ok=1
    for _ in $(seq "$runs"); do
      # A fresh lab each round: the RSS is this case's, and a round does
      # not start on what the last one left in the queues.
      lab
      if ! transport $t; then ok=0; break; fi
      if ! up; then echo "bench-stream: $t: no tunnel" >&2; ok=2; break; fi
      [ $loss = 1 ] && lossy
      set -- $(iperf $NA $NB 10.78.0.2); ab="$ab $1"; rab="$rab $2"
      set -- $(iperf $NB $NA 10.78.0.1); ba="$ba $1"; rba="$rba $2"
      rss="$(hwm_mib $NA) / $(hwm_mib $NB)"
      qd="$(counter $NA $IA stream_tx_queue_drops) / $(counter $NB $IB stream_tx_queue_drops)"
    done
    case $ok in
      0) printf '| %s | %s | pending | pending | | | | | | |\n' $t "$path"; continue ;;
      2) printf '| %s | %s | no tunnel | no tunnel | | | | | | |\n' $t "$path"; continue ;;
    esac
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' $t "$path" \
      "$(echo $ab | median)" "$(echo $ba | median)" "${ab# }" "${ba# }" \
      "$(echo $rab | median)" "$(echo $rba | median)" "$rss" "$qd"
  done
done

# The switch back: auto on a blocked path falls back to TCP; the path
# then opens. A ping a second keeps the session in use, so its rekey
# (Rekey-After-Time, 120 s after the handshake) sends the UDP probe.
if has switch; then
  lab
  block_udp
  ip netns exec $NB bin/fips-go set $IB tcp-listen on
  ip netns exec $NA bin/fips-go set $IA peer "$PUBB" transport auto
  t0=$(date +%s.%N)
  up
  t1=$(date +%s.%N)
  ip netns exec $NA bin/fips-go show $IA | grep -q 'transport: tcp' || { echo "bench-stream: auto did not fall back to TCP" >&2; exit 1; }
  hs=$(ip netns exec $NA wg show $IA latest-handshakes | awk '{print $2}')
  block_udp D
  t2=$(date +%s.%N)
  ip netns exec $NA ping -i 1 10.78.0.2 >/dev/null 2>&1 &
  back=""
  while [ -z "$back" ]; do
    now=$(date +%s.%N)
    if ! ip netns exec $NA bin/fips-go show $IA | grep -q 'transport: tcp'; then back=$now; break; fi
    awk -v a=$now -v b=$t2 'BEGIN{exit !(a - b > 300)}' && { back=never; break; }
    sleep 0.2
  done
  kill %% 2>/dev/null || true
  echo
  echo "| auto, UDP blocked | value |"
  echo "|---|---|"
  awk -v a=$t0 -v b=$t1 'BEGIN{printf "| tunnel up over TCP after | %.1f s |\n", b - a}'
  if [ "$back" = never ]; then
    echo "| back on UDP after UDP unblocked | not within 300 s |"
  else
    awk -v a=$t2 -v b=$back -v h=$hs 'BEGIN{printf "| back on UDP after UDP unblocked | %.1f s |\n| back on UDP after the TCP handshake | %.1f s |\n", b - a, b - h}'
  fi
fi
