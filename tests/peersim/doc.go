// Command peersim simulates many WireGuard peers in one process, to measure
// a gateway that has them all configured: each simulated peer has its own
// key pair (derived from a seed, so the gateway's configuration can be
// written by `peersim conf`), its own outer source address from a prefix
// routed to the simulator's network namespace, and its own session. Peers
// complete real handshakes (the project's device/noise code, answering
// cookie replies with MAC2 as a real peer does), send ICMP echo requests to
// the gateway's tunnel address at a chosen rate (the gateway's kernel
// answers them back through the tunnel), keep their sessions alive, and
// the run ends with a JSON report: per-peer handshake latency, the time
// until 50/99/100% of peers had a session, cookie replies, goodput, loss.
//
//	peersim conf -n 10000 -seed 1 > gw.conf   # the gateway's wg config
//	peersim run -n 10000 -seed 1 -gateway 192.168.97.2:51820 -src 10.99.0.0/16 -storm 1s
//
// Cheap on purpose, so that it leaves the gateway most of a small machine:
// first initiations are precomputed, sends are batched with sendmmsg
// (one UDP socket per source port, the source address of each datagram
// chosen with IP_PKTINFO), receives with recvmmsg, and a few goroutines do
// everything. tests/storm drives it; scripts/bench-storm.sh is the command.
package main
