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
	// first, TCP after an unanswered handshake, UDP again when a later
	// handshake over it is answered (the device decides).
	TransportAuto
)

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
	}
	return fmt.Sprintf("transport(%d)", uint8(t))
}

// ParseTransport parses "udp", "tcp" or "auto" (lower case, as String
// writes them).
func ParseTransport(s string) (Transport, error) {
	switch s {
	case "udp":
		return TransportUDP, nil
	case "tcp":
		return TransportTCP, nil
	case "auto":
		return TransportAuto, nil
	}
	if len(s) > 16 {
		s = s[:16] + "..."
	}
	return 0, fmt.Errorf("%w %q (want udp, tcp or auto)", ErrTransport, s)
}
