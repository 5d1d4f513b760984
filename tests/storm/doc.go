// Package storm measures a gateway with many configured peers against
// tests/peersim, the peer simulator: a gateway daemon in one network
// namespace with N peers configured (each one /32, no endpoint), the
// simulator in another with a /16 of source addresses routed to it, and a
// storm of simulated peers that handshake at once, as after a gateway
// restart, then exchange echo requests and replies through the tunnel.
//
// TestStorm (2,000 configured peers, a storm of 500, fips-go) checks that
// every peer gets a session and one authenticated packet each way; it runs
// with the end-to-end tests. TestStormBenchmark runs only with
// FIPS_STORM=1 (scripts/bench-storm.sh) and prints fips-go beside
// wireguard-go; TestActivePeersBenchmark (FIPS_STORM=1 FIPS_STORM_ACTIVE=1)
// offers the same echo load from one peer and from 1,000 at once. Both need root, /dev/net/tun, ip and wg: without them they
// skip, and with FIPS_E2E=1 they fail instead.
package storm
