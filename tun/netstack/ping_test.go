package netstack

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// Net.Ping reaches the other stack, which answers by itself, over IPv4
// and IPv6.
func TestPingThroughStack(t *testing.T) {
	p := newPair(t, Options{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, dst := range []netip.Addr{addrB4, addrB6} {
		if _, err := p.a.Ping(ctx, dst, uint16(i+1), []byte("hello")); err != nil {
			t.Errorf("ping %v: %v", dst, err)
		}
	}
	// Nobody has this address: no reply, and Ping gives up with ctx.
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if _, err := p.a.Ping(short, netip.MustParseAddr("10.0.0.99"), 3, nil); err == nil {
		t.Error("ping to an address nobody has got a reply")
	}
}
