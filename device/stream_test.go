package device

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
)

// freeTCPPort is a loopback TCP port nothing listens on.
func freeTCPPort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func peerStatus(t *testing.T, n, p *node) PeerStatus {
	t.Helper()
	for _, ps := range n.dev.Status().Peers {
		if ps.PublicKey == p.key.PublicKey() {
			return ps
		}
	}
	t.Fatalf("no peer %v", p.key.PublicKey())
	return PeerStatus{}
}

// pingPong sends a packet a to b and one back, through the tunnel.
func pingPong(t *testing.T, a, b *node, seq uint32) {
	t.Helper()
	if err := a.tun.(interface{ Inject([]byte) error }).Inject(udpPacket(addrA, addrB, seq, 200)); err != nil {
		t.Fatal(err)
	}
	next(t, b.tun, 5*time.Second)
	if err := b.tun.(interface{ Inject([]byte) error }).Inject(udpPacket(addrB, addrA, seq, 200)); err != nil {
		t.Fatal(err)
	}
	next(t, a.tun, 5*time.Second)
}

// streamPair is memPair whose UDP network counts what crosses it, with b
// listening for streams on a loopback port.
func streamPair(t *testing.T) (a, b *node, udp *atomic.Int64, tcpEp netip.AddrPort) {
	udp = new(atomic.Int64)
	netw := membind.NewNetwork(membind.NetOptions{Tap: func(_, _ netip.AddrPort, _ []byte) { udp.Add(1) }})
	a, b = memPairOn(t, netw)
	port := freeTCPPort(t)
	if err := b.dev.Apply(&Config{StreamListen: &StreamListen{On: true, Port: port}}); err != nil {
		t.Fatal(err)
	}
	if st := b.dev.Status(); st.StreamPort != port || !st.StreamListen.On {
		t.Fatalf("stream listener: %+v on %d, want port %d", st.StreamListen, st.StreamPort, port)
	}
	return a, b, udp, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
}

// A peer configured with a stream endpoint reaches the other over TCP
// alone: handshake and data both ways, no UDP datagram on the network,
// and both ends say the peer uses TCP.
func TestStreamTransportCarriesTheTunnel(t *testing.T) {
	a, b, udp, tcpEp := streamPair(t)
	tcp := conn.TransportTCP
	if err := a.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: b.key.PublicKey(), Endpoint: &tcpEp, Transport: &tcp}}}); err != nil {
		t.Fatal(err)
	}
	pingPong(t, a, b, 1)
	if n := udp.Load(); n != 0 {
		t.Fatalf("%d UDP datagrams crossed the network", n)
	}
	if ps := peerStatus(t, a, b); ps.Transport != conn.TransportTCP || ps.Endpoint != tcpEp {
		t.Fatalf("a's peer: %v via %v", ps.Endpoint, ps.Transport)
	}
	if ps := peerStatus(t, b, a); ps.Transport != conn.TransportTCP {
		t.Fatalf("b's peer: %v via %v", ps.Endpoint, ps.Transport)
	}
	if c := counter(b.dev.Status(), "stream_conns_accepted"); c != 1 {
		t.Fatalf("stream_conns_accepted = %d", c)
	}
	if c := counter(a.dev.Status(), "stream_tx_frames"); c < 2 {
		t.Fatalf("stream_tx_frames = %d", c)
	}
}

// A session moves between transports without a new handshake: UDP, then
// the stream, then UDP again, and each side follows the other's move.
func TestStreamRoamingKeepsTheSession(t *testing.T) {
	a, b, udp, tcpEp := streamPair(t)
	pingPong(t, a, b, 1)
	hs := peerStatus(t, a, b).LastHandshake
	if hs.IsZero() || udp.Load() == 0 {
		t.Fatal("no UDP session to start with")
	}

	tcp, udpT := conn.TransportTCP, conn.TransportUDP
	if err := a.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: b.key.PublicKey(), Endpoint: &tcpEp, Transport: &tcp}}}); err != nil {
		t.Fatal(err)
	}
	before := udp.Load()
	pingPong(t, a, b, 2)
	if udp.Load() != before {
		t.Fatal("the session still used UDP after moving to the stream")
	}
	if ps := peerStatus(t, b, a); ps.Transport != conn.TransportTCP {
		t.Fatalf("b did not follow a onto the stream: %v via %v", ps.Endpoint, ps.Transport)
	}

	udpEp := b.ep
	if err := a.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: b.key.PublicKey(), Endpoint: &udpEp, Transport: &udpT}}}); err != nil {
		t.Fatal(err)
	}
	framesBefore := counter(a.dev.Status(), "stream_tx_frames")
	pingPong(t, a, b, 3)
	if ps := peerStatus(t, b, a); ps.Transport != conn.TransportUDP {
		t.Fatalf("b did not follow a back to UDP: %v via %v", ps.Endpoint, ps.Transport)
	}
	if c := counter(a.dev.Status(), "stream_tx_frames"); c != framesBefore {
		t.Fatalf("a still sent %d frames on the stream after moving back", c-framesBefore)
	}
	if got := peerStatus(t, a, b).LastHandshake; !got.Equal(hs) {
		t.Fatalf("a new handshake at %v: the session did not survive the moves", got)
	}
}

// With no stream configured, nothing listens and nothing is framed.
func TestStreamOffByDefault(t *testing.T) {
	a, b := memPair(t, membind.NetOptions{})
	pingPong(t, a, b, 1)
	st := b.dev.Status()
	if st.StreamPort != 0 || st.StreamListen.On {
		t.Fatalf("stream listener on without configuration: %+v %d", st.StreamListen, st.StreamPort)
	}
	for _, n := range []*node{a, b} {
		if c := counter(n.dev.Status(), "stream_tx_frames") + counter(n.dev.Status(), "stream_rx_frames"); c != 0 {
			t.Fatalf("%d stream frames without configuration", c)
		}
	}
}

// A peer pinned to TLS reaches the other's listener (the same port that
// serves plain TCP) inside TLS: handshake and data both ways, no UDP, and
// both ends say the peer uses TLS.
func TestStreamTLSCarriesTheTunnel(t *testing.T) {
	a, b, udp, tcpEp := streamPair(t)
	tlsT := conn.TransportTLS
	sni := "www.example.com"
	if err := a.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: b.key.PublicKey(), Endpoint: &tcpEp, Transport: &tlsT, TLSServerName: &sni}}}); err != nil {
		t.Fatal(err)
	}
	pingPong(t, a, b, 1)
	if n := udp.Load(); n != 0 {
		t.Fatalf("%d UDP datagrams crossed the network", n)
	}
	if ps := peerStatus(t, a, b); ps.Transport != conn.TransportTLS || ps.TLSServerName != sni {
		t.Fatalf("a's peer: %v via %v, SNI %q", ps.Endpoint, ps.Transport, ps.TLSServerName)
	}
	if ps := peerStatus(t, b, a); ps.Transport != conn.TransportTLS {
		t.Fatalf("b's peer: %v via %v", ps.Endpoint, ps.Transport)
	}
	if c := counter(b.dev.Status(), "stream_tls_accepted"); c != 1 {
		t.Fatalf("stream_tls_accepted = %d", c)
	}
}

// Status says how each peer is configured and what it uses now: an auto
// peer on UDP, then (UDP lost) on a stream.
func TestStreamTransportStatus(t *testing.T) {
	a, b, _, _ := streamPair(t)
	auto := conn.TransportAuto
	if err := a.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: b.key.PublicKey(), Transport: &auto}}}); err != nil {
		t.Fatal(err)
	}
	pingPong(t, a, b, 1)
	ps := peerStatus(t, a, b)
	if ps.Transport != conn.TransportUDP || ps.TransportSetting != conn.TransportAuto || ps.ViaProxy {
		t.Fatalf("auto peer on UDP: %v, setting %v, via proxy %v", ps.Transport, ps.TransportSetting, ps.ViaProxy)
	}
	if ps := peerStatus(t, b, a); ps.TransportSetting != conn.TransportUDP {
		t.Fatalf("b's peer setting %v", ps.TransportSetting)
	}
}
