package conn

import (
	"errors"
	"fmt"
)

// Transport is how an endpoint's datagrams travel. The zero value is UDP,
// so an Endpoint nobody set a transport on is what it always was.
type Transport uint8

const (
	// TransportUDP sends each datagram as a UDP datagram.
	TransportUDP Transport = iota
	// TransportTCP sends datagrams on a TCP connection, each preceded by
	// its length (16-bit big-endian), the framing of Mullvad's
	// udp-over-tcp: see Stream.
	TransportTCP
	// TransportAuto is a peer's configuration, never an Endpoint's: UDP
	// first, the streams (TCP and TLS, raced) after an unanswered
	// handshake, UDP again when a later handshake over it is answered (the
	// device decides).
	TransportAuto
	// TransportTLS is TransportTCP's framing inside a TLS 1.3 connection
	// that looks like HTTPS to a middlebox: see Stream. TLS here is
	// camouflage; WireGuard authenticates the peers.
	TransportTLS
)

// IsStream reports whether t is carried by a Stream (TCP or TLS).
func (t Transport) IsStream() bool { return t == TransportTCP || t == TransportTLS }

// ErrTransport is wrapped by ParseTransport for a name it does not know.
var ErrTransport = errors.New("conn: unknown transport")

// String is the transport's name as configuration spells it.
func (t Transport) String() string {
	switch t {
	case TransportUDP:
		return "udp"
	case TransportTCP:
		return "tcp"
	case TransportAuto:
		return "auto"
	case TransportTLS:
		return "tls"
	}
	return fmt.Sprintf("transport(%d)", uint8(t))
}

// ParseTransport parses "udp", "tcp", "tls" or "auto" (lower case, as
// String writes them).
func ParseTransport(s string) (Transport, error) {
	switch s {
	case "udp":
		return TransportUDP, nil
	case "tcp":
		return TransportTCP, nil
	case "auto":
		return TransportAuto, nil
	case "tls":
		return TransportTLS, nil
	}
	if len(s) > 16 {
		s = s[:16] + "..."
	}
	return 0, fmt.Errorf("%w %q (want udp, tcp, tls or auto)", ErrTransport, s)
}
