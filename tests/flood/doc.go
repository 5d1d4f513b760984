// Package flood holds the handshake-flood benchmark: a victim and a
// legitimate peer in two network namespaces, and an attacker in a third
// that sends WireGuard initiations with a valid MAC1 for the victim's
// public key from spoofed source addresses. It measures what the
// legitimate peers keep (TCP throughput, ping RTT, fresh handshake time)
// and what the victim spends (CPU, peak RSS), for fips-go and wireguard-go
// side by side.
//
// The tests need root, /dev/net/tun, ip, wg, iperf3 and ping. Without
// them they skip; with FIPS_E2E=1 they fail instead. TestFloodSmoke (a few
// seconds, fips-go only) runs with the end-to-end tests; the whole
// benchmark runs only with FIPS_FLOOD=1 (see scripts/bench-flood.sh).
package flood
