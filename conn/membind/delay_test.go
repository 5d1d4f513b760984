package membind

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
)

// TestDelayHoldsDatagram checks the delay without waiting for it: a
// datagram is not handed out before its time and take reports how long
// is left.
func TestDelayHoldsDatagram(t *testing.T) {
	n := NewNetwork(NetOptions{Delay: time.Hour})
	a, b := n.NewBind(netip.MustParseAddr("192.0.2.1")), n.NewBind(netip.MustParseAddr("192.0.2.2"))
	a.Open(0)
	defer a.Close()
	b.Open(0)
	defer b.Close()
	a.Send([][]byte{[]byte("later")}, conn.Endpoint{Dst: b.AddrPort()})
	out, wait, _, err := b.take(b.q, [][]byte{make([]byte, 10)}, []int{0}, []conn.Endpoint{{}})
	if out != 0 || err != nil || wait < 59*time.Minute || wait > time.Hour {
		t.Fatalf("take = %d, %v, %v; want nothing yet and about an hour to wait", out, wait, err)
	}
	// Once due it is delivered.
	b.q.ring[b.q.head].at = time.Now().Add(-time.Second)
	bufs := [][]byte{make([]byte, 10)}
	out, _, _, err = b.take(b.q, bufs, []int{0}, []conn.Endpoint{{}})
	if out != 1 || err != nil || string(bufs[0][:5]) != "later" {
		t.Fatalf("after the delay: %d, %v", out, err)
	}
}
