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
//     the ceiling) from 1 MiB up to tcpReceiveBufferMax: a bulk stream gets a
//     window large enough for the tunnel's bandwidth-delay product, an idle
//     connection does not pin megabytes.
//   - A fixed tcpSendBuffer: gVisor does not auto-tune send buffers, and
//     with GSO the sender needs several 64 KiB super-packets in flight.
//   - Reno with RACK-TLP loss detection, chosen by measurement
//     (BenchmarkNetstackPairTCPVariants and BenchmarkNetstackWAN; figures in
//     docs/benchmarks.md): equal without loss, far ahead with a little
//     loss at short RTT. gVisor's CUBIC regrows its window very slowly at
//     sub-millisecond RTTs, and without RACK a loss inside a 64 KiB
//     GSO/GRO burst rarely produces three duplicate ACKs, so recovery
//     waits for the retransmission timeout.
//   - TIME-WAIT of TCPTimeWait (5 s) instead of gVisor's 60 s: each
//     connection this side closed first keeps its endpoint, about 6.5 KiB,
//     and its port until TIME-WAIT ends, so a program dialling short
//     connections holds dial rate x TIME-WAIT of them, and at 60 s would
//     run out of ephemeral ports towards one destination. 5 s covers the
//     peer's FIN retransmissions at a 1 s RTO (after 1 and 3 s), and
//     inside a tunnel, whose path is one UDP flow, old segments do not
//     linger for a minute. Port reuse from TIME-WAIT stays gVisor's
//     default (loopback only).
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
