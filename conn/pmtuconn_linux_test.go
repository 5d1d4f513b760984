package conn

import (
	"errors"
	"net/netip"
	"testing"
)

// TestPathMTUConn: a connected socket reports its route's MTU (here the
// namespace's loopback, 1400), refuses a probe bigger than that with
// ErrProbeTooBig instead of fragmenting it, sends one that fits, and
// afterwards fragments oversized datagrams again as before the probe.
func TestPathMTUConn(t *testing.T) {
	const mtu = 1400
	var ends []*end
	var pcs []PathMTUConn
	fams := []struct {
		lo  netip.Addr
		hdr int
	}{{lo4, 28}, {lo6, 48}}
	inNetns(t, mtu, func() error {
		for range 2 {
			b := NewLinux(Options{})
			fns, port, err := b.Open(0)
			if err != nil {
				return err
			}
			ends = append(ends, &end{b: b, fns: fns, port: port})
		}
		for _, f := range fams {
			if len(ends[1].fns) < 2 && f.lo.Is6() {
				break
			}
			pc, err := ends[0].b.Connect(Endpoint{Dst: ends[1].at(f.lo)})
			if err != nil {
				return err
			}
			pcs = append(pcs, pc.(PathMTUConn))
		}
		return nil
	})
	for _, e := range ends {
		t.Cleanup(func() { e.b.Close() })
	}
	bufs, _, _ := rxBufs(4, groBufferSize)
	for i, pc := range pcs {
		f := fams[i]
		got, err := pc.PathMTU()
		if err != nil || got != mtu {
			t.Fatalf("%v: PathMTU %d, %v; want %d", f.lo, got, err, mtu)
		}
		if err := pc.SendProbe(make([]byte, mtu-f.hdr+1)); !errors.Is(err, ErrProbeTooBig) {
			t.Fatalf("%v: probe one byte too big: %v, want ErrProbeTooBig", f.lo, err)
		}
		fit := burst(1, mtu-f.hdr)
		if err := pc.SendProbe(fit[0]); err != nil {
			t.Fatalf("%v: probe that fits: %v", f.lo, err)
		}
		big := burst(1, 3000)
		if err := pc.Send(big); err != nil {
			t.Fatalf("%v: 3000 bytes after a probe: %v", f.lo, err)
		}
		got2, _ := recvN(t, ends[1], ends[1].fns[i], 2, bufs)
		if len(got2[0]) != len(fit[0]) || len(got2[1]) != 3000 {
			t.Fatalf("%v: received %d and %d bytes, want %d and 3000", f.lo, len(got2[0]), len(got2[1]), len(fit[0]))
		}
	}
}
