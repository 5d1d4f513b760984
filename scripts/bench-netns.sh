#!/usr/bin/env bash
# Side-by-side benchmark of fips-go and wireguard-go with real TUNs: two
# network namespaces joined by a veth, one tunnel implementation on both
# ends, iperf3 through the tunnel. Needs root, iperf3, wg, ping.
#
#   [BENCH_RUNS=N] bash scripts/bench-netns.sh [seconds] [impl...]
#
# An impl is a binary in bin/ that honours the wireguard-go command line
# (fips-go and wireguard-go are built here; wireguard-go-ts is Tailscale's
# fork, see docs/benchmarks.md), or boringtun, built with cargo on first use.
#
# Prints one row per implementation and test: throughput, CPU seconds per
# GB in the two tunnel processes together, TCP retransmissions (segments
# the iperf3 sender sent again, per 1,000 it sent), peak RSS per process,
# and ping RTT idle and under load. With BENCH_RUNS=N (default 1) it runs
# N rounds, each starting with the next implementation (this machine
# drifts by 15-30% within a run, which a fixed order would charge to
# whoever runs last), and ends with a table of the medians over the
# rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"; shift || true
runs="${BENCH_RUNS:-1}"
impls=("$@"); [ ${#impls[@]} -gt 0 ] || impls=(fips-go wireguard-go)
[ "$(id -u)" -eq 0 ] || { echo "bench-netns: needs root" >&2; exit 1; }
bash scripts/deps.sh
mkdir -p bin
# Static, as the README builds it: no libc mapped, 1.5 MiB less RSS. The
# references are built the same way (bin/wireguard-go-ts too: see docs/benchmarks.md).
export CGO_ENABLED=0
go build -o bin/fips-go .
go build -o bin/wireguard-go golang.zx2c4.com/wireguard
for i in "${impls[@]}"; do
  if [ "$i" = boringtun ]; then
    bash scripts/deps-boringtun.sh
    [ -x bin/boringtun-cli ] || { echo "bench-netns: boringtun needs cargo (scripts/deps-boringtun.sh)" >&2; exit 1; }
  fi
done
NA=fbench-a NB=fbench-b
cleanup() {
  for n in $NA $NB; do
    ip netns pids $n 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del $n 2>/dev/null || true
  done
}
results=$(mktemp /tmp/fbench-results.XXXXXX)
trap 'cleanup; rm -f "$results"' EXIT
clk=$(getconf CLK_TCK)

# A tunnel may be several processes (fips-go's privilege separation: a
# root monitor beside the worker): a side's CPU is their sum, its memory
# as scripts/mem.sh counts it.
cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $t; }
. scripts/mem.sh

setup() { # impl
  cleanup
  ip netns add $NA; ip netns add $NB
  ip link add va netns $NA type veth peer name vb netns $NB
  ip -n $NA addr add 192.168.77.1/24 dev va; ip -n $NB addr add 192.168.77.2/24 dev vb
  ip -n $NA link set va up; ip -n $NB link set vb up
  ip -n $NA link set lo up; ip -n $NB link set lo up
  local ka kb
  ka=$(bin/fips-go genkey); kb=$(bin/fips-go genkey)
  local cmd=("bin/$1")
  # boringtun (scripts/deps-boringtun.sh builds it) runs as root like the
  # others, without dropping its privileges.
  [ "$1" = boringtun ] && cmd=(bin/boringtun-cli --disable-drop-privileges)
  ip netns exec $NA env LOG_LEVEL=error "${cmd[@]}" fbwa
  ip netns exec $NB env LOG_LEVEL=error "${cmd[@]}" fbwb
  ip netns exec $NA wg set fbwa listen-port 51820 private-key <(echo "$ka") \
    peer "$(echo "$kb" | bin/fips-go pubkey)" endpoint 192.168.77.2:51820 allowed-ips 10.77.0.2/32
  ip netns exec $NB wg set fbwb listen-port 51820 private-key <(echo "$kb") \
    peer "$(echo "$ka" | bin/fips-go pubkey)" endpoint 192.168.77.1:51820 allowed-ips 10.77.0.1/32
  ip -n $NA addr add 10.77.0.1/24 dev fbwa; ip -n $NB addr add 10.77.0.2/24 dev fbwb
  ip -n $NA link set fbwa mtu 1420 up; ip -n $NB link set fbwb mtu 1420 up
  ip netns exec $NA ping -c 3 -i 0.2 -W 2 10.77.0.2 >/dev/null
  PA=$(ip netns pids $NA | tr '\n' ' '); PB=$(ip netns pids $NB | tr '\n' ' ')
}

rtt() { # ns dst count -> "median/p90" ms of count pings at 20 Hz (lost: +N lost)
  ip netns exec "$1" ping -n -c "$3" -i 0.05 -W 1 "$2" | python3 -c '
import sys, re
t = sorted(float(m.group(1)) for m in (re.search(r"time=([0-9.]+)", l) for l in sys.stdin) if m)
n = int(sys.argv[1])
if not t: print("lost"); sys.exit()
q = lambda f: t[min(len(t) - 1, int(f * len(t)))]
print("%.2f/%.2f" % (q(0.5), q(0.9)) + ("" if len(t) == n else " (%d lost)" % (n - len(t))))' "$3"
}

run_iperf() { # label impl extra-args
  local label=$1 impl=$2; shift 2
  ip netns exec $NB iperf3 -s -1 -D -I /tmp/fbench-iperf.pid >/dev/null
  sleep 0.3
  local c0a c0b
  c0a=$(cpu_ticks $PA); c0b=$(cpu_ticks $PB)
  ip netns exec $NA iperf3 -c 10.77.0.2 -t "$secs" -J "$@" > /tmp/fbench.json &
  local ip=$!
  # 100 pings at 20 Hz from 2 s in: the queue has built by then.
  sleep 2
  local loaded; loaded=$(rtt $NA 10.77.0.2 100)
  wait $ip
  local c1a c1b; c1a=$(cpu_ticks $PA); c1b=$(cpu_ticks $PB)
  local bytes gbps cpu retr
  bytes=$(python3 -c 'import json,sys;d=json.load(open("/tmp/fbench.json"));print(int(d["end"]["sum_received"]["bytes"]))')
  gbps=$(python3 -c 'import json;d=json.load(open("/tmp/fbench.json"));print("%.2f"%(d["end"]["sum_received"]["bits_per_second"]/1e9))')
  cpu=$(python3 -c "print('%.2f'%(((($c1a-$c0a)+($c1b-$c0b))/$clk)/($bytes/1e9)))")
  # Retransmitted segments per 1,000 sent, the sender's MSS taken as 1368
  # (MTU 1420 less 52 bytes of IPv4, TCP and timestamp headers).
  retr=$(python3 -c 'import json;e=json.load(open("/tmp/fbench.json"))["end"]["sum_sent"];print("%.2f"%(1000*e.get("retransmits",0)/max(1,e["bytes"]/1368)))')
  printf '| %-14s | %-17s | %6s Gbit/s | %6s s/GB | %6s ‰ | %11s ms |\n' "$impl" "$label" "$gbps" "$cpu" "$retr" "$loaded"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$impl" "$label" "$gbps" "$cpu" "${loaded%% *}" "$retr" >> "$results"
}

run_udp() { # impl: a stream of single-packet UDP datagrams at 130 Mbit/s
  ip netns exec $NB iperf3 -s -1 -D -I /tmp/fbench-iperf.pid >/dev/null
  sleep 0.3
  ip netns exec $NA iperf3 -c 10.77.0.2 -u -b 130M -l 1392 -t "$secs" -J > /tmp/fbench.json
  local got
  got=$(python3 -c 'import json;d=json.load(open("/tmp/fbench.json"))["end"]["sum"];print("%.2f%% of %d delivered"%(100-d["lost_percent"],d["packets"]))')
  printf '| %-14s | %-17s | %s |\n' "$1" "udp 130 Mbit/s" "$got"
  printf '%s\tudp 130 Mbit/s\t%s\n' "$1" "${got%%\%*}" >> "$results"
}

echo "| impl           | test              | throughput    | CPU/GB    | retrans  | RTT p50/p90    |"
for ((r = 0; r < runs; r++)); do
  [ "$runs" -gt 1 ] && echo "|   round $((r + 1)) of $runs, $(date -u +%H:%M) UTC"
  nimpl=${#impls[@]}
  for ((i = 0; i < nimpl; i++)); do
    impl=${impls[$(((i + r) % nimpl))]}
    setup "$impl"
    idle=$(rtt $NA 10.77.0.2 100)
    run_iperf "1 stream"          "$impl"
    run_iperf "1 stream reverse"  "$impl" -R
    run_iperf "4 streams"         "$impl" -P 4
    run_iperf "4 streams reverse" "$impl" -P 4 -R
    run_udp "$impl"
    rss_a=$(hwm_mib $PA)
    rss_b=$(hwm_mib $PB)
    echo "|   $impl: idle RTT ${idle} ms, peak RSS $rss_a / $rss_b MiB"
    printf '%s\tidle\t%s\t%s\t%s\n' "$impl" "${idle%% *}" "$rss_a" "$rss_b" >> "$results"
  done
done
[ "$runs" -gt 1 ] || exit 0
echo
echo "Medians over $runs rounds:"
python3 - "$results" "${impls[@]}" <<'PY'
import sys, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
med = lambda xs: "%.2f" % st.median(xs) if xs else "-"
def num(v):
    try: return float(v)
    except ValueError: return None
def col(impl, test, i):
    return [x for x in (num(r[i]) for r in rows if r[0] == impl and r[1] == test and len(r) > i) if x is not None]
print("| impl           | test              | throughput    | CPU/GB    | retrans  | RTT p50/p90    |")
for impl in sys.argv[2:]:
    for test in ("1 stream", "1 stream reverse", "4 streams", "4 streams reverse"):
        p = [r[4].split("/") for r in rows if r[0] == impl and r[1] == test and "/" in r[4]]
        rtt = "%s/%s" % (med([float(a) for a, b in p]), med([float(b) for a, b in p])) if p else "lost"
        print("| %-14s | %-17s | %6s Gbit/s | %6s s/GB | %6s ‰ | %11s ms |" % (impl, test, med(col(impl, test, 2)), med(col(impl, test, 3)), med(col(impl, test, 5)), rtt))
    print("| %-14s | %-17s | %s%% delivered |" % (impl, "udp 130 Mbit/s", med(col(impl, "udp 130 Mbit/s", 2))))
    p = [r[2].split("/") for r in rows if r[0] == impl and r[1] == "idle" and "/" in r[2]]
    idle = "%s/%s" % (med([float(a) for a, b in p]), med([float(b) for a, b in p])) if p else "lost"
    rss = lambda i: "%.1f" % st.median(col(impl, "idle", i)) if col(impl, "idle", i) else "-"
    print("|   %s: idle RTT %s ms, peak RSS %s / %s MiB" % (impl, idle, rss(3), rss(4)))
PY
