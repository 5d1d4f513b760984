package conn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/fips-go/fips-go/conn/internal/srclimit"
)

// TLS camouflage for the stream transport (TransportTLS): the same framing
// inside a TLS 1.3 connection, so that a middlebox that lets only TLS out
// (often only to port 443) sees a client that looks like a browser: SNI
// when the user names a server, ALPN offering h2 and http/1.1.
//
// TLS adds nothing to the tunnel's security and is not asked to: WireGuard
// authenticates both peers and encrypts every datagram inside it. So the
// client does not verify the server's certificate (there is nothing to
// check it against that WireGuard does not check better), and the server
// serves a self-signed certificate made at start. An active prober can
// complete the handshake and then finds a server that closes the
// connection on anything that is not a WireGuard message from someone who
// knows its public key.

// alpn is what a browser offers.
var alpn = []string{"h2", "http/1.1"}

// sniffLen is how many bytes of a new connection tell TLS from the plain
// framing.
const sniffLen = 6

// looksLikeTLS reports whether the first bytes of a connection are a TLS
// record holding a ClientHello: content type 22 (0x16), version 3.1 to 3.3,
// a 2-byte length, handshake type 1.
//
// A plain stream cannot begin so: its first two bytes are the first
// frame's length, and 0x16 0x03 is a frame of 5635 bytes whose first byte
// (the WireGuard message type) would have to be 1 to 3. Types 1 to 3 are
// handshake messages, and everything a WireGuard or AmneziaWG peer sends
// before it has a session (an initiation padded by S1, junk, signature
// packets) is at most 1280 bytes. Only a peer resuming a session on a new
// connection starts with a data message, whose type is 4, or, under
// AmneziaWG, H4: a custom H4 whose low byte is 1 to 3 and whose high byte
// is 1, with a tunnel MTU above 5600, is the one ambiguous case.
func looksLikeTLS(b []byte) bool {
	return len(b) >= sniffLen && b[0] == 0x16 && b[1] == 0x03 &&
		b[2] >= 0x01 && b[2] <= 0x03 && b[5] == 0x01
}

// prefixConn is a net.Conn whose first bytes were already read.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// sniff reads the first bytes of an accepted connection and returns the
// connection to frame on (TLS, handshaken, or the plain one) and its
// transport. It needs no deadline of its own: the unproven timer closes nc.
func (s *Stream) sniff(nc net.Conn) (net.Conn, Transport, error) {
	// One byte first: a plain stream's first frame may be short (not from
	// WireGuard, whose smallest message is 32 bytes, but from tests), and
	// one that starts 0x16 is at least 5632 bytes long.
	b := make([]byte, sniffLen)
	if _, err := io.ReadFull(nc, b[:1]); err != nil {
		return nil, 0, err
	}
	if b[0] == 0x16 {
		if _, err := io.ReadFull(nc, b[1:]); err != nil {
			return nil, 0, err
		}
	} else {
		b = b[:1]
	}
	pc := &prefixConn{Conn: nc, pre: b}
	if !looksLikeTLS(b) {
		return pc, TransportTCP, nil
	}
	if !s.tls.allow(nc.RemoteAddr(), &s.opts) {
		s.ctr.tlsLimited.Add(1)
		return nil, 0, errTLSLimited
	}
	cfg, err := s.serverTLS()
	if err != nil {
		return nil, 0, err
	}
	tc := tls.Server(pc, cfg)
	if err := tc.Handshake(); err != nil {
		return nil, 0, err
	}
	return tc, TransportTLS, nil
}

// errTLSLimited closes an accepted connection whose source began too
// many TLS handshakes lately.
var errTLSLimited = errors.New("conn: too many TLS handshakes from this source")

// streamTLS is the listener's TLS configuration, and its per-source limit
// on handshakes.
type streamTLS struct {
	mu   sync.Mutex       // guards the fields below; a leaf
	user *tls.Certificate // SetCertificate's, nil: none
	self *tls.Certificate // made at the first TLS client without user
	cfg  *tls.Config      // made from one of them on first use
	// limit is made at the first TLS client: a server's handshake (a
	// signature and a key exchange) is spent before anything
	// authenticates the client, so one source looping over connections
	// must not get as many as it asks for.
	limit *srclimit.Limiter
}

// allow takes one handshake from the budget of from's source (an IPv4
// address, an IPv6 /64).
func (t *streamTLS) allow(from net.Addr, o *StreamOptions) bool {
	ta, ok := from.(*net.TCPAddr)
	if !ok {
		return true // admit takes only TCP connections
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.limit == nil {
		t.limit = srclimit.New(o.tlsLimit)
	}
	return t.limit.Allow(ta.AddrPort().Addr(), time.Now())
}

// SetCertificate makes the listener serve cert to TLS clients from now
// on; nil goes back to a self-signed certificate made in memory.
func (s *Stream) SetCertificate(cert *tls.Certificate) {
	s.tls.mu.Lock()
	s.tls.user, s.tls.cfg = cert, nil
	s.tls.mu.Unlock()
}

// serverTLS is the listener's TLS configuration: the user's certificate,
// or a self-signed one.
func (s *Stream) serverTLS() (*tls.Config, error) {
	t := &s.tls
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cfg == nil {
		cert := t.user
		if cert == nil {
			if t.self == nil {
				c, err := selfSigned("")
				if err != nil {
					return nil, err
				}
				t.self = &c
			}
			cert = t.self
		}
		t.cfg = &tls.Config{
			Certificates: []tls.Certificate{*cert},
			MinVersion:   tls.VersionTLS13,
			NextProtos:   alpn,
			// Full 16 KiB records from the start: fewer writes, and
			// the stream's traffic is not a web page's first paint.
			DynamicRecordSizingDisabled: true,
		}
	}
	return t.cfg, nil
}

// clientTLS runs a TLS handshake on nc as the client, naming serverName
// (none when empty or an address).
func clientTLS(ctx context.Context, nc net.Conn, serverName string) (net.Conn, error) {
	tc := tls.Client(nc, &tls.Config{
		ServerName:                  serverName,
		NextProtos:                  alpn,
		MinVersion:                  tls.VersionTLS13,
		DynamicRecordSizingDisabled: true,
		// WireGuard authenticates the peer; see the comment at the top.
		InsecureSkipVerify: true,
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("conn: TLS handshake: %w", err)
	}
	return tc, nil
}

// selfSigned makes an ECDSA P-256 certificate for name, valid for a year
// from a day ago, held only in memory.
func selfSigned(name string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-24 * time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if name != "" {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
