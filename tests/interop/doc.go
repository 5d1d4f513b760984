// Package interop checks fips-go against wireguard-go, the reference
// userspace implementation, without root: each side runs a userspace
// (gVisor netstack) TUN, and the two devices talk over real UDP sockets on
// the loopback interface. It also holds the side-by-side netstack benchmark
// (BenchmarkNetstackPair) and the fips-go to fips-go bulk-transfer test.
//
// Everything is in _test.go files; this file only carries the package
// documentation.
package interop
