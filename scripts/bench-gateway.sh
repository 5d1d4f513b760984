#!/usr/bin/env bash
# Side-by-side benchmark of tunnel implementations as a forwarding gateway,
# the most common WireGuard server: a client namespace whose tunnel carries
# a far network, a gateway namespace that forwards between its tunnel and
# a veth to that network, and a far namespace running iperf3 -s. The same
# implementation runs on the client and the gateway. Needs root, iperf3,
# wg, iptables and ip6tables.
#
#   [BENCH_RUNS=N] bash scripts/bench-gateway.sh [seconds] [impl...]
#
# Impls as in scripts/bench-netns.sh (binaries in bin/ that honour the
# wireguard-go command line; bin/wireguard-go-ts is Tailscale's fork, see
# docs/benchmarks.md). Both ends are given each other's endpoint, since
# Tailscale's fork does not learn a roaming client's.
#
# Cases: the gateway masquerading the client's traffic (nat) or plainly
# routing it with the far host routing the tunnel's network back (routed),
# over IPv4 and IPv6, downstream (far -> gateway -> tunnel -> client,
# iperf3 -R) and upstream. One row per case: throughput, CPU seconds per GB
# in the two tunnel processes together, and the gateway daemon's peak RSS.
# With BENCH_RUNS=N (default 1), N rounds, each starting with the next
# implementation, then a table of medians.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-5}"; shift || true
runs="${BENCH_RUNS:-1}"
impls=("$@"); [ ${#impls[@]} -gt 0 ] || impls=(fips-go wireguard-go)
[ "$(id -u)" -eq 0 ] || { echo "bench-gateway: needs root" >&2; exit 1; }
bash scripts/deps.sh
command -v ip6tables >/dev/null || { echo "bench-gateway: needs ip6tables" >&2; exit 1; }
mkdir -p bin
export CGO_ENABLED=0
go build -o bin/fips-go .
go build -o bin/wireguard-go golang.zx2c4.com/wireguard
for i in "${impls[@]}"; do
  [ -x "bin/$i" ] || { echo "bench-gateway: no bin/$i (see docs/benchmarks.md)" >&2; exit 1; }
done
if grep -q avx512ifma /proc/cpuinfo; then cpu="AVX-512 IFMA"; else cpu="no AVX-512 IFMA"; fi
echo "bench-gateway: $(nproc) CPUs, $cpu, $(uname -r), ${secs} s per case, $runs round(s)"

NC=fgw-client NG=fgw-gateway NF=fgw-far
cleanup() {
  for n in $NC $NG $NF; do
    ip netns pids $n 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del $n 2>/dev/null || true
  done
}
results=$(mktemp /tmp/fgw-results.XXXXXX)
trap 'cleanup; rm -f "$results" /tmp/fgw.json' EXIT
clk=$(getconf CLK_TCK)
# A tunnel may be several processes (fips-go's privilege separation: a
# root monitor beside the worker): a side's figures are their sum.
cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $t; }
. scripts/mem.sh

# Addresses: underlay client-gateway 192.168.88.0/24; tunnel 10.88.0.0/24
# and fd88::/64; far network 10.89.0.0/24 and fd89::/64 (gateway .1, far .2).
setup() { # impl mode
  local impl=$1 mode=$2
  cleanup
  ip netns add $NC; ip netns add $NG; ip netns add $NF
  ip link add cgu netns $NC type veth peer name gwu netns $NG
  ip link add gwf netns $NG type veth peer name farx netns $NF
  ip -n $NC addr add 192.168.88.1/24 dev cgu; ip -n $NG addr add 192.168.88.2/24 dev gwu
  ip -n $NG addr add 10.89.0.1/24 dev gwf; ip -n $NF addr add 10.89.0.2/24 dev farx
  ip -n $NG addr add fd89::1/64 dev gwf nodad; ip -n $NF addr add fd89::2/64 dev farx nodad
  for l in "$NC cgu" "$NG gwu" "$NG gwf" "$NF farx"; do set -- $l; ip -n $1 link set $2 up; done
  for n in $NC $NG $NF; do ip -n $n link set lo up; done
  ip netns exec $NG sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
  if [ "$mode" = nat ]; then
    ip netns exec $NG iptables -t nat -A POSTROUTING -s 10.88.0.0/24 -o gwf -j MASQUERADE
    ip netns exec $NG ip6tables -t nat -A POSTROUTING -s fd88::/64 -o gwf -j MASQUERADE
  else
    ip -n $NF route add 10.88.0.0/24 via 10.89.0.1
    ip -n $NF route add fd88::/64 via fd89::1
  fi
  local kc kg
  kc=$(bin/fips-go genkey); kg=$(bin/fips-go genkey)
  ip netns exec $NC env LOG_LEVEL=error "bin/$impl" fgwc >/dev/null 2>&1
  ip netns exec $NG env LOG_LEVEL=error "bin/$impl" fgwg >/dev/null 2>&1
  ip netns exec $NC wg set fgwc listen-port 51820 private-key <(echo "$kc") \
    peer "$(echo "$kg" | bin/fips-go pubkey)" endpoint 192.168.88.2:51820 \
    allowed-ips 10.88.0.2/32,fd88::2/128,10.89.0.0/24,fd89::/64
  ip netns exec $NG wg set fgwg listen-port 51820 private-key <(echo "$kg") \
    peer "$(echo "$kc" | bin/fips-go pubkey)" endpoint 192.168.88.1:51820 \
    allowed-ips 10.88.0.1/32,fd88::1/128
  ip -n $NC addr add 10.88.0.1/24 dev fgwc; ip -n $NG addr add 10.88.0.2/24 dev fgwg
  ip -n $NC addr add fd88::1/64 dev fgwc nodad; ip -n $NG addr add fd88::2/64 dev fgwg nodad
  ip -n $NC link set fgwc mtu 1420 up; ip -n $NG link set fgwg mtu 1420 up
  ip -n $NC route add 10.89.0.0/24 dev fgwc; ip -n $NC route add fd89::/64 dev fgwc
  ip netns exec $NC ping -c 3 -i 0.2 -W 2 10.89.0.2 >/dev/null
  ip netns exec $NC ping -6 -c 3 -i 0.2 -W 2 fd89::2 >/dev/null
  PC=$(ip netns pids $NC | tr '\n' ' '); PG=$(ip netns pids $NG | tr '\n' ' ')
}

run_case() { # impl mode family dir
  local impl=$1 mode=$2 fam=$3 dir=$4 dst=10.89.0.2 args=()
  [ "$fam" = v6 ] && dst=fd89::2
  [ "$dir" = down ] && args=(-R)
  ip netns exec $NF iperf3 -s -1 -D -I /tmp/fgw-iperf.pid >/dev/null
  sleep 0.3
  local c0c c0g c1c c1g
  c0c=$(cpu_ticks $PC); c0g=$(cpu_ticks $PG)
  ip netns exec $NC iperf3 -c "$dst" -t "$secs" -J "${args[@]}" > /tmp/fgw.json
  c1c=$(cpu_ticks $PC); c1g=$(cpu_ticks $PG)
  local bytes gbps cpu label="$mode $fam $dir"
  bytes=$(python3 -c 'import json;d=json.load(open("/tmp/fgw.json"));print(int(d["end"]["sum_received"]["bytes"]))')
  gbps=$(python3 -c 'import json;d=json.load(open("/tmp/fgw.json"));print("%.2f"%(d["end"]["sum_received"]["bits_per_second"]/1e9))')
  cpu=$(python3 -c "print('%.2f'%(((($c1c-$c0c)+($c1g-$c0g))/$clk)/max(1e-9,$bytes/1e9)))")
  printf '| %-15s | %-16s | %6s Gbit/s | %6s s/GB |\n' "$impl" "$label" "$gbps" "$cpu"
  printf '%s\t%s\t%s\t%s\n' "$impl" "$label" "$gbps" "$cpu" >> "$results"
}

echo "| impl            | case             | throughput    | CPU/GB    |"
for ((r = 0; r < runs; r++)); do
  [ "$runs" -gt 1 ] && echo "|   round $((r + 1)) of $runs, $(date -u +%H:%M) UTC"
  nimpl=${#impls[@]}
  for ((i = 0; i < nimpl; i++)); do
    impl=${impls[$(((i + r) % nimpl))]}
    for mode in nat routed; do
      setup "$impl" "$mode"
      for fam in v4 v6; do
        for dir in down up; do run_case "$impl" "$mode" "$fam" "$dir"; done
      done
      rss=$(hwm_mib $PG)
      echo "|   $impl $mode: gateway peak RSS $rss MiB"
    done
  done
done
[ "$runs" -gt 1 ] || exit 0
echo
echo "Medians over $runs rounds ($cpu):"
python3 - "$results" "${impls[@]}" <<'PY'
import sys, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
impls = sys.argv[2:]
cases = []
for r in rows:
    if r[1] not in cases: cases.append(r[1])
def med(impl, case, i):
    xs = [float(r[i]) for r in rows if r[0] == impl and r[1] == case]
    return st.median(xs) if xs else None
print("| case | " + " | ".join(impls) + " | " + " | ".join("%s / %s" % (impls[0], o) for o in impls[1:]) + " |")
print("|---" * (1 + 2 * len(impls) - 1) + "|")
for c in cases:
    g = [med(i, c, 2) for i in impls]
    cpu = [med(i, c, 3) for i in impls]
    cells = ["%.2f Gbit/s, %.2f s/GB" % (a, b) if a is not None else "-" for a, b in zip(g, cpu)]
    ratio = ["%.2fx" % (g[0] / x) if g[0] and x else "-" for x in g[1:]]
    print("| %s | %s | %s |" % (c, " | ".join(cells), " | ".join(ratio)))
PY
