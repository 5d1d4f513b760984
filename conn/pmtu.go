package conn

import "errors"

// PathMTUConn is a PeerConn that can tell the path MTU the kernel knows
// for its endpoint and send a datagram the path may not fragment: what
// path MTU discovery needs. The Linux connected socket is one.
type PathMTUConn interface {
	PeerConn
	// PathMTU is the largest datagram (outer IP header included) the
	// kernel would send to the endpoint unfragmented: the route's MTU, or
	// less once an ICMP error taught it better.
	PathMTU() (int, error)
	// SendProbe sends one datagram with don't-fragment set, ignoring the
	// path MTU the kernel knows: a probe of whether the path carries it.
	// A datagram too big for the local link fails with ErrProbeTooBig.
	// While it runs, another datagram sent on the socket may leave with
	// DF set too (the setting is the socket's): at worst it is lost, as
	// a probe is.
	SendProbe(b []byte) error
}

// ErrProbeTooBig is returned by SendProbe for a datagram larger than the
// local link carries.
var ErrProbeTooBig = errors.New("conn: probe larger than the local link's MTU")
