//go:build linux

package main

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"sync"

	"golang.org/x/crypto/blake2s"

	"github.com/fips-go/fips-go/device/noise"
)

// derivedKey is the private key number i of a run with this seed; i < 0 is
// the gateway's. The simulator and the gateway's configuration derive the
// same keys, so no key file of 100,000 entries is passed around.
func derivedKey(seed uint64, i int) noise.PrivateKey {
	var b [8 + 16 + 8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	copy(b[8:], "peersim key v1  ")
	binary.LittleEndian.PutUint64(b[24:], uint64(int64(i)))
	k := noise.PrivateKey(blake2s.Sum256(b[:]))
	k[0] &= 248 // clamped as Curve25519 wants it
	k[31] = (k[31] & 127) | 64
	return k
}

// innerAddr is peer i's tunnel address: 100.64.0.0/10 from .1 on, so up
// to four million peers fit below the gateway's address.
func innerAddr(i int) [4]byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], 100<<24|64<<16+uint32(i)+1)
	return b
}

// gatewayInner is the gateway's tunnel address, the last of 100.64.0.0/10.
var gatewayInner = [4]byte{100, 127, 255, 254}

// sourcesPerPort is how many outer addresses of a /16 the peers use: .0.0
// and .255.255 are left out. Peer i sends from address 1 + i%sourcesPerPort
// of the prefix and port basePort + i/sourcesPerPort.
func outerSource(prefix netip.Prefix, basePort uint16, i int) (addr [4]byte, port uint16) {
	n := uint32(1)<<(32-prefix.Bits()) - 2
	base := prefix.Masked().Addr().As4()
	v := binary.BigEndian.Uint32(base[:]) + 1 + uint32(i)%n
	binary.BigEndian.PutUint32(addr[:], v)
	return addr, basePort + uint16(uint32(i)/n)
}

// parallel runs f(i) for i in [0, n) on every CPU.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	w := runtime.GOMAXPROCS(0)
	for g := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += w {
				f(i)
			}
		}()
	}
	wg.Wait()
}
