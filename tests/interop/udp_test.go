package interop

import (
	"bytes"
	"net/netip"
	"testing"
	"time"
)

// datagramSizes are the UDP payloads exchangeUDP tries: tiny, the largest
// that fits the tunnel MTU unfragmented, and one the sending stack must
// fragment and the receiving stack reassemble.
func datagramSizes(v6 bool) []int {
	hdr := 20 + 8
	if v6 {
		hdr = 40 + 8
	}
	return []int{1, mtu - hdr, 4000}
}

// exchangeUDP sends one datagram of size bytes from one node's stack to a
// UDP socket on the other's and checks it arrives whole. UDP may be lost,
// so it resends until one arrives or pingAttempts are used up.
func exchangeUDP(t *testing.T, from, to node, size int) {
	t.Helper()
	at := netip.AddrPortFrom(to.addr(), 7000)
	pc, err := to.listenUDP(at)
	if err != nil {
		t.Fatalf("%s listen udp %v: %v", to.name(), at, err)
	}
	defer pc.Close()
	c, err := from.dialUDP(at)
	if err != nil {
		t.Fatalf("%s dial udp %v: %v", from.name(), at, err)
	}
	defer c.Close()
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + size)
	}
	buf := make([]byte, size+1)
	for range pingAttempts {
		if _, err := c.Write(want); err != nil {
			t.Fatalf("%s -> %s: udp write of %d bytes: %v", from.name(), to.name(), size, err)
		}
		pc.SetReadDeadline(time.Now().Add(pingWait))
		n, src, err := pc.ReadFrom(buf)
		if err != nil {
			continue
		}
		if !bytes.Equal(buf[:n], want) {
			t.Fatalf("%s -> %s: udp datagram of %d bytes arrived as %d different bytes", from.name(), to.name(), size, n)
		}
		if got := src.String(); got != c.LocalAddr().String() {
			t.Fatalf("%s -> %s: udp datagram from %v, want %v", from.name(), to.name(), got, c.LocalAddr())
		}
		return
	}
	t.Fatalf("%s -> %s: no %d-byte udp datagram arrived", from.name(), to.name(), size)
}
