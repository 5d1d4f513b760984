package netstack

import (
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// applyTCPOptions tunes gVisor's TCP for a tunnel endpoint.
//
//   - SACK on: recovering several losses per window without waiting for
//     timeouts.
//   - Receive buffer auto-tuning (which also sizes the window scale from
//     the ceiling) from 1 MiB up to TCPReceiveBufferMax: a bulk stream gets a
//     window large enough for the tunnel's bandwidth-delay product, an idle
//     connection does not pin megabytes.
//   - A fixed TCPSendBuffer: gVisor does not auto-tune send buffers, and
//     with GSO the sender needs several 64 KiB super-packets in flight.
//   - Reno with RACK-TLP loss detection, chosen by measurement with
//     BenchmarkNetstackPairTCPVariants (two Nets back to back, one stream,
//     two shared cores; ranges over three runs). Without loss all four
//     combinations are within noise of each other (3-8 Gbit/s). With 0.1%
//     of packets dropped, the stand-in for a tunnel whose UDP buffers
//     overflow now and then: reno+RACK 2.3-3.8 Gbit/s, reno alone 0.4-0.5,
//     cubic+RACK 0.2-0.4, cubic alone 0.17. gVisor's CUBIC regrows its
//     window very slowly at sub-millisecond RTTs, and without RACK a loss
//     inside a 64 KiB GSO/GRO burst rarely produces three duplicate ACKs,
//     so recovery waits for the retransmission timeout.
//     BenchmarkNetstackWAN (two devices over a delayed, lossy in-memory link;
//     docs/benchmarks.md) kept reno over distance too: CUBIC led only on
//     loss-free paths of 40 and 120 ms RTT (1.5x), was level at 10 ms and
//     on every lossy long path, and 4-5x behind with loss at short RTT.
//     The same runs showed auto-tuning (40 ms: 0.38 vs 0.05 Gbit/s), RACK
//     and SACK (loopback, 0.1% loss: 1.05 vs 0.29 and 0.06) worth keeping,
//     and 16 MiB buffers no better than these.
//   - TIME-WAIT of TCPTimeWait (5 s) instead of gVisor's 60 s: each closed
//     connection this side closed first keeps its endpoint, about 6.5 KiB,
//     and its port until TIME-WAIT ends, so a program dialling short
//     connections holds dial rate x TIME-WAIT of them (measured: 10,000
//     closed connections held 66 MiB for a minute; at the 6,000 dials/s two
//     tunnels in one process reach, 60 s would also exhaust the ~49,500
//     ephemeral ports towards one destination). TIME-WAIT exists to
//     re-acknowledge a retransmitted FIN and to let old segments of the
//     connection die out; 5 s covers the peer's FIN retransmissions at a
//     1 s RTO (after 1 and 3 s), and inside a tunnel, whose path is one
//     UDP flow, segments do not linger for a minute. Port reuse from
//     TIME-WAIT stays gVisor's default (loopback only).
func (n *Net) applyTCPOptions() error {
	o := n.opts
	sack := tcpip.TCPSACKEnabled(true)
	moderate := tcpip.TCPModerateReceiveBufferOption(true)
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{
		Min:     minBufferSize,
		Default: min(defaultRcvBuffer, o.tcpReceiveBufferMax),
		Max:     o.tcpReceiveBufferMax,
	}
	snd := tcpip.TCPSendBufferSizeRangeOption{
		Min:     minBufferSize,
		Default: o.tcpSendBuffer,
		Max:     o.tcpSendBuffer,
	}
	cc := tcpip.CongestionControlOption(o.congestionControl)
	recovery := tcpip.TCPRecovery(tcpip.TCPRACKLossDetection)
	if o.disableRACK {
		recovery = 0
	}
	timeWait := tcpip.TCPTimeWaitTimeoutOption(o.TCPTimeWait)
	for _, opt := range []tcpip.SettableTransportProtocolOption{&sack, &moderate, &rcv, &snd, &cc, &recovery, &timeWait} {
		if err := n.stack.SetTransportProtocolOption(tcp.ProtocolNumber, opt); err != nil {
			return tcpipErr("set TCP option", err)
		}
	}
	return nil
}
