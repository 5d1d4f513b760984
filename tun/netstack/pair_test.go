package netstack

import (
	"errors"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/fips-go/fips-go/tun"
)

var (
	addrA4 = netip.MustParseAddr("10.0.0.1")
	addrB4 = netip.MustParseAddr("10.0.0.2")
	addrA6 = netip.MustParseAddr("fd00::1")
	addrB6 = netip.MustParseAddr("fd00::2")
)

// packetIO is the part of a TUN pump needs: ours or wireguard-go's.
type packetIO interface {
	Read(bufs [][]byte, sizes []int, offset int) (int, error)
	Write(bufs [][]byte, offset int) (int, error)
	BatchSize() int
	MTU() (int, error)
}

// pump moves packets from one device to another in batches, as the tunnel
// would, until Read fails. check, if set, sees every packet and may drop it
// by returning false.
func pump(t testing.TB, from, to packetIO, check func([]byte) bool) {
	bs := from.BatchSize()
	mtu, _ := from.MTU()
	bufs := make([][]byte, bs)
	pkts := make([][]byte, bs)
	sizes := make([]int, bs)
	for i := range bufs {
		bufs[i] = make([]byte, tun.Headroom+mtu)
	}
	for {
		n, err := from.Read(bufs, sizes, tun.Headroom)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				t.Errorf("pump Read: %v", err)
			}
			return
		}
		k := 0
		for i := range n {
			pkts[k] = bufs[i][:tun.Headroom+sizes[i]]
			if check == nil || check(pkts[k][tun.Headroom:]) {
				k++
			}
		}
		if _, err := to.Write(pkts[:k], tun.Headroom); err != nil {
			if !errors.Is(err, os.ErrClosed) {
				t.Errorf("pump Write: %v", err)
			}
			return
		}
	}
}

// pair is two Nets wired back to back.
type pair struct {
	a, b *Net
	wg   sync.WaitGroup
}

// newPair starts two Nets (A: 10.0.0.1, fd00::1; B: 10.0.0.2, fd00::2)
// and the pumps between them; cleanup closes both and waits for the pumps.
func newPair(t testing.TB, opts Options, check func([]byte) bool) *pair {
	t.Helper()
	oa, ob := opts, opts
	oa.Addresses = []netip.Addr{addrA4, addrA6}
	ob.Addresses = []netip.Addr{addrB4, addrB6}
	a, err := New(oa)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(ob)
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	p := &pair{a: a, b: b}
	p.wg.Add(2)
	go func() { defer p.wg.Done(); pump(t, a, b, check) }()
	go func() { defer p.wg.Done(); pump(t, b, a, check) }()
	t.Cleanup(p.close)
	return p
}

func (p *pair) close() {
	p.a.Close()
	p.b.Close()
	p.wg.Wait()
}
