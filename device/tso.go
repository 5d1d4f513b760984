package device

import (
	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun"
)

// The TUN's TSO super-packets, sized to the UDP messages they leave in.
//
// The kernel's TCP hands the TUN super-packets of up to 64 KiB: 47 segments
// at MTU 1420. Sealed, each segment is a datagram of up to MTU+32 bytes,
// and one UDP_SEGMENT message carries at most conn.GSOMaxBytes of them: 45.
// So every super-packet left as a message of 45 datagrams and one of 2. The
// receiving kernel queues them as two coalesced messages, and a receiver
// that reads the first before the second has arrived writes the stream to
// its TUN in two pieces, for which the receiving TCP sends two ACKs, each
// its own trip through both daemons. Super-packets of at most 45 segments
// let the receiver write larger pieces, with fewer TUN writes, ACKs and
// receive calls (docs/architecture.md, "GSO, GRO and TSO";
// docs/benchmarks.md).
//
// tsoMaxSize says what to set the interface's GSO maximum to so that no
// super-packet has more segments than one message carries. The device
// applies it only with Options.sizeTSO: the kernel holds packets it
// forwards into the TUN to the same maximum and segments the larger ones
// in software, so on a forwarding gateway the sizing turned every
// forwarded 64 KiB super-packet into 47 reads of one packet each and
// halved its throughput toward its clients.

// tsoMinShrunk is the smallest super-packet shrinking may leave: at small
// MTUs, where 64 datagrams are the limit, one message's worth is half of
// 64 KiB or less, which would double the sender's TUN reads. Only MTU 1420
// was measured; this keeps the change to MTUs where it takes a quarter
// off at most.
const tsoMinShrunk = 48 << 10

// tsoMaxSize returns the GSO maximum to give the TUN at this MTU, and false
// where the kernel's default is right: a 64 KiB super-packet fits one
// message already (large MTUs), or shrinking it to one message's worth
// would cut it below tsoMinShrunk (small MTUs).
//
// TCP sizes a super-packet to the interface's GSO maximum less its own
// header reserve (MAX_TCP_HEADER, a few hundred bytes), in whole segments;
// the size returned makes that at most n segments of the smallest MSS,
// and so of any larger one, whatever the reserve.
func tsoMaxSize(mtu int) (int, bool) {
	mss, ok := tun.MinTCPMSS(mtu)
	if !ok {
		return 0, false
	}
	n := min(conn.GSOMaxSegments, conn.GSOMaxBytes/(mtu+noise.TransportOverhead))
	if tun.LegacyGSOMax/mss <= n || n*mss < tsoMinShrunk {
		return 0, false
	}
	return tun.GSOMaxForSegments(mss, n), true
}

// gsoSizer is a TUN whose GSO maximum can be set: the kernel TUN.
type gsoSizer interface {
	SetGSOMaxSize(size int) error
}

// sizeTSO gives the TUN the GSO maximum for mtu when the MTU has changed
// since the last time, and the kernel's default back when a new MTU needs
// none after an earlier one did. A TUN that cannot be sized (in memory,
// gVisor's, no CAP_NET_ADMIN) is left as it is, which costs only the
// ACKs. Called with mtuMu held, or before the device runs.
func (d *Device) sizeTSO(mtu int) {
	sz, ok := d.tun.(gsoSizer)
	if !ok || !d.opts.sizeTSO || mtu == d.tsoMTU {
		return
	}
	d.tsoMTU = mtu
	size, shrink := tsoMaxSize(mtu)
	if !shrink {
		if !d.tsoShrunk {
			return
		}
		size = tun.LegacyGSOMax
	}
	if err := sz.SetGSOMaxSize(size); err != nil {
		d.opts.Logf("device: MTU %d: the TUN's GSO maximum is not %d: %v", mtu, size, err)
		return
	}
	d.tsoShrunk = shrink
}
