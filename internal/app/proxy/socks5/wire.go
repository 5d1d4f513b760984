// Package socks5 is a SOCKS5 server (RFC 1928) with CONNECT and UDP
// ASSOCIATE and optional username/password authentication (RFC 1929), for
// reaching the tunnel through a userspace TCP/IP stack. The wire formats
// are pure functions here; server.go does the I/O.
package socks5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
)

// Protocol constants of RFC 1928 and RFC 1929.
const (
	version = 5

	MethodNoAuth       = 0x00
	MethodUserPass     = 0x02
	MethodNoAcceptable = 0xff

	CmdConnect      = 1
	CmdBind         = 2
	CmdUDPAssociate = 3

	atypIPv4   = 1
	atypDomain = 3
	atypIPv6   = 4

	RepSucceeded           = 0
	RepGeneralFailure      = 1
	RepNotAllowed          = 2
	RepNetworkUnreachable  = 3
	RepHostUnreachable     = 4
	RepConnectionRefused   = 5
	RepTTLExpired          = 6
	RepCommandNotSupported = 7
	RepAddrNotSupported    = 8

	userPassVersion = 1
)

// ErrProtocol is wrapped by every error about malformed input.
var ErrProtocol = errors.New("socks5: protocol error")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// Addr is a SOCKS address: an IP or a domain name, and a port.
type Addr struct {
	IP   netip.Addr // valid for IPv4 and IPv6 addresses
	Host string     // the domain name otherwise
	Port uint16
}

func (a Addr) String() string {
	if a.IP.IsValid() {
		return netip.AddrPortFrom(a.IP, a.Port).String()
	}
	return fmt.Sprintf("%s:%d", a.Host, a.Port)
}

// AddrFrom makes an Addr of ap.
func AddrFrom(ap netip.AddrPort) Addr { return Addr{IP: ap.Addr().Unmap(), Port: ap.Port()} }

// ReadGreeting reads the client's greeting:
//
//	+-----+----------+----------+
//	| VER | NMETHODS | METHODS  |
//	|  1  |    1     | 1 to 255 |
//	+-----+----------+----------+
func ReadGreeting(r io.Reader) (methods []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	if h[0] != version {
		return nil, protoErr("version %d, want 5", h[0])
	}
	if h[1] == 0 {
		return nil, protoErr("no authentication methods offered")
	}
	methods = make([]byte, h[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return nil, err
	}
	return methods, nil
}

// ReadUserPass reads an RFC 1929 request:
//
//	+-----+------+----------+------+----------+
//	| VER | ULEN |  UNAME   | PLEN |  PASSWD  |
//	|  1  |  1   | 1 to 255 |  1   | 1 to 255 |
//	+-----+------+----------+------+----------+
func ReadUserPass(r io.Reader) (user, pass string, err error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return "", "", err
	}
	if h[0] != userPassVersion {
		return "", "", protoErr("username/password version %d, want 1", h[0])
	}
	u := make([]byte, h[1])
	if _, err := io.ReadFull(r, u); err != nil {
		return "", "", err
	}
	var pl [1]byte
	if _, err := io.ReadFull(r, pl[:]); err != nil {
		return "", "", err
	}
	p := make([]byte, pl[0])
	if _, err := io.ReadFull(r, p); err != nil {
		return "", "", err
	}
	return string(u), string(p), nil
}

// Request is a client's command.
type Request struct {
	Cmd  byte
	Addr Addr
}

// ReadRequest reads a request:
//
//	+-----+-----+-------+------+----------+----------+
//	| VER | CMD |  RSV  | ATYP | DST.ADDR | DST.PORT |
//	|  1  |  1  | X'00' |  1   | Variable |    2     |
//	+-----+-----+-------+------+----------+----------+
func ReadRequest(r io.Reader) (Request, error) {
	var h [3]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Request{}, err
	}
	if h[0] != version {
		return Request{}, protoErr("request version %d, want 5", h[0])
	}
	a, err := readAddr(r)
	if err != nil {
		return Request{}, err
	}
	return Request{Cmd: h[1], Addr: a}, nil
}

// readAddr reads ATYP, the address and the port.
func readAddr(r io.Reader) (Addr, error) {
	var t [1]byte
	if _, err := io.ReadFull(r, t[:]); err != nil {
		return Addr{}, err
	}
	var a Addr
	switch t[0] {
	case atypIPv4:
		var b [4 + 2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return Addr{}, err
		}
		a.IP = netip.AddrFrom4([4]byte(b[:4]))
		a.Port = binary.BigEndian.Uint16(b[4:])
	case atypIPv6:
		var b [16 + 2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return Addr{}, err
		}
		a.IP = netip.AddrFrom16([16]byte(b[:16])).Unmap()
		a.Port = binary.BigEndian.Uint16(b[16:])
	case atypDomain:
		var l [1]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return Addr{}, err
		}
		if l[0] == 0 {
			return Addr{}, protoErr("empty domain name")
		}
		b := make([]byte, int(l[0])+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return Addr{}, err
		}
		a.Host = string(b[:l[0]])
		a.Port = binary.BigEndian.Uint16(b[l[0]:])
		if err := checkHost(a.Host); err != nil {
			return Addr{}, err
		}
	default:
		return Addr{}, protoErr("address type %d", t[0])
	}
	return a, nil
}

// checkHost accepts names made of printable ASCII without spaces, slashes
// or colons; anything else cannot be a DNS name.
func checkHost(h string) error {
	for i := 0; i < len(h); i++ {
		if c := h[i]; c <= ' ' || c >= 0x7f || c == '/' || c == ':' {
			return protoErr("bad character %q in domain name", c)
		}
	}
	return nil
}

// AppendAddr appends ATYP, address and port; a domain longer than 255
// bytes is an error.
func AppendAddr(b []byte, a Addr) ([]byte, error) {
	switch {
	case a.IP.Is4():
		b = append(b, atypIPv4)
		b = append(b, a.IP.AsSlice()...)
	case a.IP.Is6():
		b = append(b, atypIPv6)
		b = append(b, a.IP.AsSlice()...)
	case a.Host != "" && len(a.Host) <= 255:
		b = append(b, atypDomain, byte(len(a.Host)))
		b = append(b, a.Host...)
	default:
		return b, fmt.Errorf("socks5: cannot encode address %q", a.Host)
	}
	return binary.BigEndian.AppendUint16(b, a.Port), nil
}

// AppendRequest appends a request (for clients and tests).
func AppendRequest(b []byte, req Request) ([]byte, error) {
	return AppendAddr(append(b, version, req.Cmd, 0), req.Addr)
}

// AppendReply appends a reply: VER REP RSV then the bound address.
func AppendReply(b []byte, rep byte, bound Addr) []byte {
	if !bound.IP.IsValid() && bound.Host == "" {
		bound.IP = netip.IPv4Unspecified()
	}
	out, err := AppendAddr(append(b, version, rep, 0), bound)
	if err != nil {
		out, _ = AppendAddr(append(b, version, rep, 0), Addr{IP: netip.IPv4Unspecified()})
	}
	return out
}

// ParseUDP parses a UDP relay datagram:
//
//	+-----+------+------+----------+----------+----------+
//	| RSV | FRAG | ATYP | DST.ADDR | DST.PORT |   DATA   |
//	|  2  |  1   |  1   | Variable |    2     | Variable |
//	+-----+------+------+----------+----------+----------+
//
// Fragments (FRAG != 0) are not supported, as in most servers.
func ParseUDP(b []byte) (Addr, []byte, error) {
	if len(b) < 4 {
		return Addr{}, nil, protoErr("UDP datagram of %d bytes", len(b))
	}
	if b[2] != 0 {
		return Addr{}, nil, protoErr("UDP fragment %d (fragmentation is not supported)", b[2])
	}
	r := byteReader{b: b[3:]}
	a, err := readAddr(&r)
	if err != nil {
		if !errors.Is(err, ErrProtocol) {
			err = protoErr("UDP datagram header truncated")
		}
		return Addr{}, nil, err
	}
	return a, r.b, nil
}

// AppendUDPHeader appends the header of a relayed datagram from a.
func AppendUDPHeader(b []byte, a Addr) ([]byte, error) {
	return AppendAddr(append(b, 0, 0, 0), a)
}

// byteReader reads from a slice without copying it.
type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
