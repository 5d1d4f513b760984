package conn

import (
	"fmt"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// openInNetns opens one bind per options set inside a fresh namespace whose
// loopback has MTU loMTU, and closes them at cleanup.
func openInNetns(t *testing.T, loMTU int, opts ...Options) []*end {
	t.Helper()
	ends := make([]*end, len(opts))
	inNetns(t, loMTU, func() error {
		for i, o := range opts {
			b := NewLinux(o)
			fns, port, err := b.Open(0)
			if err != nil {
				return err
			}
			ends[i] = &end{b: b, fns: fns, port: port}
		}
		return nil
	})
	for _, e := range ends {
		t.Cleanup(func() { e.b.Close() })
	}
	return ends
}

// TestSendAbovePathMTU: with a 1500-byte path, datagrams of 2000 and 9000
// bytes (a jumbo tunnel MTU over a 1500 underlay) arrive whole, sent one by
// one and as equal-size batches. The kernel cannot fragment GSO segments,
// so a batch of them is refused once, counted, and resent as plain
// datagrams it fragments; later sends of segments that big skip GSO
// without a failing syscall, and small datagrams still coalesce.
func TestSendAbovePathMTU(t *testing.T) {
	ends := openInNetns(t, 1500, Options{}, Options{})
	a, b := ends[0], ends[1]
	fams := []struct {
		name string
		lo   netip.Addr
		v6   bool
	}{{"ipv4", lo4, false}, {"ipv6", lo6, true}}
	bufs, _, _ := rxBufs(64, groBufferSize)
	for fi, f := range fams {
		t.Run(f.name, func(t *testing.T) {
			if f.v6 && (a.sock(true) == nil || len(b.fns) < 2) {
				t.Skip("no IPv6")
			}
			if !a.sock(f.v6).gso.Load() {
				t.Skip("kernel without UDP_SEGMENT")
			}
			fn, dst := b.fns[fi], Endpoint{Dst: b.at(f.lo)}
			send := func(want [][]byte) Stats {
				t.Helper()
				before := a.b.Stats()
				if err := a.b.Send(want, dst); err != nil {
					t.Fatalf("send %d x %d bytes: %v", len(want), len(want[0]), err)
				}
				got, eps := recvN(t, b, fn, len(want), bufs)
				checkBurst(t, got, eps, want, a.at(f.lo), f.lo)
				after := a.b.Stats()
				if after.SendErrors != 0 || after.GSOFallbacks != 0 {
					t.Fatalf("stats %+v: want no send errors and GSO not refused", after)
				}
				return Stats{GSOOversize: after.GSOOversize - before.GSOOversize,
					TxMessages: after.TxMessages - before.TxMessages}
			}
			for _, size := range []int{2000, 9000} {
				if d := send(burst(1, size)); d.TxMessages != 1 || d.GSOOversize != 0 {
					t.Fatalf("one %d-byte datagram: %+v", size, d)
				}
			}
			if d := send(burst(30, 2000)); d.GSOOversize != 1 || d.TxMessages != 30 {
				t.Fatalf("30 x 2000 bytes: %+v, want one oversize fallback and 30 plain sends", d)
			}
			if got := a.sock(f.v6).segLimit.Load(); got != 2000 {
				t.Fatalf("segment limit %d after 2000-byte segments were refused", got)
			}
			if d := send(burst(7, 9000)); d.GSOOversize != 0 || d.TxMessages != 7 {
				t.Fatalf("7 x 9000 bytes: %+v, want 7 plain sends without trying GSO", d)
			}
			if d := send(burst(40, 1000)); d.TxMessages != 1 {
				t.Fatalf("40 x 1000 bytes took %d messages, want 1: GSO must stay on for small segments", d.TxMessages)
			}
			if !a.sock(f.v6).gso.Load() {
				t.Fatal("GSO turned off for good")
			}
		})
	}
}

// TestOversizeErrno: which refusals mean "segment above the path MTU" (the
// datagrams are resent plainly, GSO stays on) and which mean "no GSO here"
// (GSO goes off for the socket).
func TestOversizeErrno(t *testing.T) {
	for _, c := range []struct {
		e    unix.Errno
		seg  int
		want bool
	}{
		{unix.EMSGSIZE, 2000, true},
		{unix.EMSGSIZE, 500, true}, // a path below 576: still the MTU
		{unix.EINVAL, 1452, true},  // older kernels
		{unix.EINVAL, gsoSafeSegment, false},
		{unix.EINVAL, 1000, false}, // SO_NO_CHECK and the like
		{unix.EIO, 9000, false},
		{unix.EOPNOTSUPP, 9000, false},
	} {
		if got := oversizeErrno(c.e, c.seg); got != c.want {
			t.Errorf("oversizeErrno(%v, %d) = %v, want %v", c.e, c.seg, got, c.want)
		}
	}
}

// TestReceiveReassembled: over a 1500-byte path the largest datagrams UDP
// allows (65507 bytes over IPv4, 65527 over IPv6) arrive as fragments the
// kernel reassembles. With GRO and without, one is received whole into a
// buffer that fits it, and into one that does not it is dropped and
// counted, never truncated, and the next datagram still arrives.
func TestReceiveReassembled(t *testing.T) {
	for _, gro := range []bool{true, false} {
		t.Run(fmt.Sprintf("gro=%v", gro), func(t *testing.T) {
			ends := openInNetns(t, 1500, Options{}, Options{DisableGRO: !gro})
			a, b := ends[0], ends[1]
			if b.sock(false).gro != gro {
				t.Skip("kernel without UDP_GRO")
			}
			for fi, f := range []struct {
				lo  netip.Addr
				max int
			}{{lo4, 1<<16 - 1 - 20 - 8}, {lo6, 1<<16 - 1 - 8}} {
				if fi >= len(b.fns) {
					t.Skip("no IPv6")
				}
				dst := Endpoint{Dst: b.at(f.lo)}
				want := burst(1, f.max)
				if err := a.b.Send(want, dst); err != nil {
					t.Fatal(err)
				}
				big, _, _ := rxBufs(4, f.max)
				got, eps := recvN(t, b, b.fns[fi], 1, big)
				checkBurst(t, got, eps, want, a.at(f.lo), f.lo)

				before := b.b.Stats().RxOversize
				small := burst(1, 100)
				if err := a.b.Send(append(want, small...), dst); err != nil {
					t.Fatal(err)
				}
				bufs, _, _ := rxBufs(4, 1500)
				got, eps = recvN(t, b, b.fns[fi], 1, bufs)
				checkBurst(t, got, eps, small, a.at(f.lo), f.lo)
				if d := b.b.Stats().RxOversize - before; d != 1 {
					t.Fatalf("%v: RxOversize grew by %d for one datagram too big for its buffer", f.lo, d)
				}
			}
		})
	}
}
