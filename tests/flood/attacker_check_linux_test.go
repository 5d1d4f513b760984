//go:build linux

package flood

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device/noise"
)

// TestForgedPacketsPassTheVictimsChecks checks the attacker against our
// own cookie code, without root: its MAC1 is what a responder accepts, its
// headers are well formed, and after a cookie reply from the responder its
// next packets from that source carry a valid MAC2 (and other sources'
// packets still do not).
func TestForgedPacketsPassTheVictimsChecks(t *testing.T) {
	priv, err := noise.GeneratePrivateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.PublicKey()
	victim := netip.MustParseAddrPort("192.168.99.2:51820")
	f, err := newForge(victim, pub, netip.MustParsePrefix("10.99.0.0/16"), false, 40000, 1)
	if err != nil {
		t.Fatal(err)
	}
	checker := noise.NewCookieChecker(pub, rand.Reader)
	now := time.Now()
	p := make([]byte, packetLen)

	f.build(p, 7, now)
	msg := p[ipHeaderLen+udpHeaderLen:]
	if !checker.CheckMAC1(msg) {
		t.Fatal("forged initiation's MAC1 is not valid for the victim's key")
	}
	if got := binary.BigEndian.Uint16(p[2:]); got != packetLen || p[9] != 17 {
		t.Fatalf("IP header: length %d protocol %d", got, p[9])
	}
	src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(p[12:16])), binary.BigEndian.Uint16(p[20:]))
	if want := netip.MustParseAddrPort("10.99.0.7:40000"); src != want {
		t.Fatalf("source %v, want %v", src, want)
	}
	if _, err := noise.ParseInitiation(msg); err != nil {
		t.Fatalf("forged initiation does not parse: %v", err)
	}
	if !bytes.Equal(msg[mac2Off:], make([]byte, 16)) {
		t.Fatal("MAC2 set before any cookie")
	}

	reply, err := checker.CreateReply(msg, binary.LittleEndian.Uint32(msg[4:]), src, now)
	if err != nil {
		t.Fatal(err)
	}
	isCookie, ok := f.consumeReply(reply.AppendTo(nil), now)
	if !isCookie || !ok {
		t.Fatalf("cookie reply not taken: cookie %v opened %v", isCookie, ok)
	}

	next := uint32(7 + 1<<16) // the same source, a later packet
	f.build(p, next, now)
	if !checker.CheckMAC1(msg) || !checker.CheckMAC2(msg, src, now) {
		t.Fatal("packet from a source holding a cookie has no valid MAC2")
	}
	f.build(p, 8, now)
	other := netip.MustParseAddrPort("10.99.0.8:40000")
	if checker.CheckMAC2(msg, other, now) {
		t.Fatal("a source without a cookie sent a valid MAC2")
	}

	// A reply to a packet the attacker no longer remembers is refused.
	stale := reply
	stale.Receiver = 12345
	if _, ok := f.consumeReply(stale.AppendTo(nil), now); ok {
		t.Fatal("reply to an unknown packet accepted")
	}
}
