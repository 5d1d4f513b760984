// Package e2e holds fips-go's end-to-end tests: real TUN devices in network
// namespaces joined by veth pairs, driven by the stock wg and wg-quick tools,
// with wireguard-go as the reference peer.
//
// The tests need root, /dev/net/tun and the tools scripts/deps.sh installs.
// Without them they skip; with FIPS_E2E=1 in the environment they fail
// instead, so that CI cannot pass by skipping. FIPS_GO_BIN names a prebuilt
// fips-go binary; otherwise the tests build one, plus a fips-go built with
// -tags fipsgo_testtimers and wireguard-go from the module cache.
package e2e
