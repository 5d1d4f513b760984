package membind_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/internal/conntest"
	"github.com/fips-go/fips-go/conn/membind"
)

var (
	loop4 = netip.MustParseAddr("127.0.0.1")
	hostA = netip.MustParseAddr("192.0.2.1") // documentation range: memory only
	hostB = netip.MustParseAddr("192.0.2.2")
	hostC = netip.MustParseAddr("192.0.2.3")
)

func TestConformance(t *testing.T) {
	conntest.Run(t, func(t *testing.T) (a, b conn.Bind) {
		n := membind.NewNetwork(membind.NetOptions{QueueLen: 8192})
		return n.NewBind(loop4), n.NewBind(loop4)
	})
}

// rx opens b and returns a function that takes exactly n datagrams that are
// already queued (sends in these tests complete before receiving, so no
// call blocks).
func rx(t *testing.T, b *membind.Bind) func(n int) ([]string, []conn.Endpoint) {
	t.Helper()
	fns, _, err := b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return func(n int) ([]string, []conn.Endpoint) {
		t.Helper()
		var data []string
		var eps []conn.Endpoint
		bufs := make([][]byte, 16)
		for i := range bufs {
			bufs[i] = make([]byte, 1500)
		}
		sizes, es := make([]int, 16), make([]conn.Endpoint, 16)
		for len(data) < n {
			got, err := fns[0](bufs[:min(16, n-len(data))], sizes, es)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				data = append(data, string(bufs[i][:sizes[i]]))
				eps = append(eps, es[i])
			}
		}
		return data, eps
	}
}

func numbered(n int) [][]byte {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = []byte(fmt.Sprint(i))
	}
	return bufs
}

// run sends 2000 datagrams through a faulty network and returns what
// arrived, in order, and the network's counters.
func run(t *testing.T, seed int64) ([]string, membind.NetStats) {
	n := membind.NewNetwork(membind.NetOptions{Loss: 0.2, Duplicate: 0.1, Reorder: 0.1, Seed: seed, QueueLen: 4096})
	a, b := n.NewBind(hostA), n.NewBind(hostB)
	if _, _, err := a.Open(0); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	recv := rx(t, b)
	for range 20 {
		if err := a.Send(numbered(100), conn.Endpoint{Dst: b.AddrPort()}); err != nil {
			t.Fatal(err)
		}
	}
	s := n.Stats()
	// Every datagram is lost, or delivered once or twice; a reordered
	// one held at the very end is released when the receiver runs dry.
	want := int(s.Sent - s.Lost + s.Duplicated - s.QueueDrops)
	got, _ := recv(want)
	return got, s
}

func TestDeterministicFaults(t *testing.T) {
	got1, s1 := run(t, 7)
	got2, s2 := run(t, 7)
	if s1 != s2 || fmt.Sprint(got1) != fmt.Sprint(got2) {
		t.Fatalf("same seed, different outcome:\n%+v\n%+v", s1, s2)
	}
	got3, s3 := run(t, 8)
	if s3 == s1 && fmt.Sprint(got3) == fmt.Sprint(got1) {
		t.Fatal("different seeds gave identical faults")
	}
	if s1.Sent != 2000 || s1.Lost < 300 || s1.Lost > 500 || s1.Duplicated < 100 || s1.Duplicated > 250 || s1.Reordered < 100 {
		t.Fatalf("fault counts far from the configured rates: %+v", s1)
	}
}

func TestReorderSwapsNeighbours(t *testing.T) {
	n := membind.NewNetwork(membind.NetOptions{Reorder: 1})
	a, b := n.NewBind(hostA), n.NewBind(hostB)
	a.Open(0)
	defer a.Close()
	recv := rx(t, b)
	if err := a.Send(numbered(6), conn.Endpoint{Dst: b.AddrPort()}); err != nil {
		t.Fatal(err)
	}
	got, _ := recv(6)
	if fmt.Sprint(got) != "[1 0 3 2 5 4]" || n.Stats().Reordered != 3 {
		t.Fatalf("got %v, %+v", got, n.Stats())
	}
}

func TestDuplicate(t *testing.T) {
	n := membind.NewNetwork(membind.NetOptions{Duplicate: 1})
	a, b := n.NewBind(hostA), n.NewBind(hostB)
	a.Open(0)
	defer a.Close()
	recv := rx(t, b)
	a.Send(numbered(3), conn.Endpoint{Dst: b.AddrPort()})
	if got, _ := recv(6); fmt.Sprint(got) != "[0 0 1 1 2 2]" {
		t.Fatalf("got %v", got)
	}
}

func TestQueueBound(t *testing.T) {
	n := membind.NewNetwork(membind.NetOptions{QueueLen: 4})
	a, b := n.NewBind(hostA), n.NewBind(hostB)
	a.Open(0)
	defer a.Close()
	recv := rx(t, b)
	a.Send(numbered(10), conn.Endpoint{Dst: b.AddrPort()})
	if got, _ := recv(4); fmt.Sprint(got) != "[0 1 2 3]" || n.Stats().QueueDrops != 6 {
		t.Fatalf("got %v, %+v", got, n.Stats())
	}
}

// TestRoaming moves a host to a new address: traffic to the old one stops
// being routed, a reply that names the old address as its sticky source
// leaves from the new one and is counted, and the peer learns the new
// address from it.
func TestRoaming(t *testing.T) {
	n := membind.NewNetwork(membind.NetOptions{})
	a, b := n.NewBind(hostA), n.NewBind(hostB)
	recvA, recvB := rx(t, a), rx(t, b)
	a.Send([][]byte{[]byte("hi")}, conn.Endpoint{Dst: b.AddrPort()})
	_, eps := recvB(1)
	if eps[0].Src != hostB || eps[0].Dst != a.AddrPort() {
		t.Fatalf("endpoint %+v", eps[0])
	}
	old := b.AddrPort()
	if err := b.SetAddr(hostC); err != nil {
		t.Fatal(err)
	}
	a.Send([][]byte{[]byte("lost")}, conn.Endpoint{Dst: old})
	if s := n.Stats(); s.Unroutable != 1 {
		t.Fatalf("send to the old address: %+v", s)
	}
	b.Send([][]byte{[]byte("from new")}, eps[0])
	if b.Stats().StickyFallback != 1 {
		t.Fatalf("stale sticky source not counted: %+v", b.Stats())
	}
	_, epsA := recvA(1)
	if epsA[0].Dst != netip.AddrPortFrom(hostC, old.Port()) {
		t.Fatalf("reply came from %v, want the new address", epsA[0].Dst)
	}
}

func TestIPv6AndFamilies(t *testing.T) {
	n := membind.NewNetwork(membind.NetOptions{})
	a, b := n.NewBind(netip.IPv6Loopback()), n.NewBind(netip.MustParseAddr("::ffff:192.0.2.9"))
	recvA := rx(t, a)
	if _, _, err := b.Open(0); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.AddrPort().Addr() != netip.MustParseAddr("192.0.2.9") {
		t.Fatalf("mapped address kept: %v", b.AddrPort())
	}
	if err := b.Send([][]byte{[]byte("x")}, conn.Endpoint{Dst: a.AddrPort()}); err == nil {
		t.Fatal("IPv4 bind sent to an IPv6 address")
	}
	c := n.NewBind(netip.MustParseAddr("2001:db8::1"))
	c.Open(0)
	defer c.Close()
	c.Send([][]byte{[]byte("v6")}, conn.Endpoint{Dst: a.AddrPort()})
	if got, eps := recvA(1); got[0] != "v6" || eps[0].Dst != c.AddrPort() {
		t.Fatalf("got %v from %v", got, eps[0].Dst)
	}
}

func TestSetAddrConflict(t *testing.T) {
	n := membind.NewNetwork(membind.NetOptions{})
	a, b := n.NewBind(hostA), n.NewBind(hostB)
	_, p, _ := a.Open(0)
	defer a.Close()
	if _, _, err := b.Open(p); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.SetAddr(hostA); err == nil {
		t.Fatal("moved onto an address:port in use")
	}
	if b.AddrPort().Addr() != hostB {
		t.Fatal("failed move changed the address")
	}
}

func TestMark(t *testing.T) {
	b := membind.NewNetwork(membind.NetOptions{}).NewBind(hostA)
	if err := b.SetMark(51820); err != nil || b.Mark() != 51820 {
		t.Fatalf("mark %d, %v", b.Mark(), err)
	}
}

func TestClosedReceive(t *testing.T) {
	b := membind.NewNetwork(membind.NetOptions{}).NewBind(hostA)
	fns, _, _ := b.Open(0)
	b.Close()
	_, err := fns[0]([][]byte{make([]byte, 10)}, []int{0}, []conn.Endpoint{{}})
	if !errors.Is(err, net.ErrClosed) {
		t.Fatalf("got %v", err)
	}
}
