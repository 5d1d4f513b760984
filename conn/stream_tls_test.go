package conn_test

import (
	"bytes"
	"crypto/tls"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/internal/streamframe"
)

// A Stream dialing a TLS endpoint reaches a listener that also serves
// plain TCP; the server reports the TLS transport and answers on the same
// connection.
func TestStreamTLSRoundTrip(t *testing.T) {
	srv, addr := listenStream(t, conn.StreamOptions{})
	cli := conn.NewStream(conn.StreamOptions{})
	defer cli.Close()
	ep := conn.Endpoint{Dst: addr, Transport: conn.TransportTLS}
	var out [][]byte
	for i := range 50 {
		out = append(out, bytes.Repeat([]byte{byte(i)}, 100+i))
	}
	if err := cli.Send(out, ep); err != nil {
		t.Fatal(err)
	}
	got, from := recvN(t, srv, len(out))
	for i := range out {
		if !bytes.Equal(got[i], out[i]) {
			t.Fatalf("datagram %d: got %d bytes, sent %d", i, len(got[i]), len(out[i]))
		}
		if from[i].Transport != conn.TransportTLS {
			t.Fatalf("datagram %d from %+v, want the TLS transport", i, from[i])
		}
	}
	if err := srv.Send([][]byte{[]byte("reply")}, from[0]); err != nil {
		t.Fatal(err)
	}
	back, bfrom := recvN(t, cli, 1)
	if string(back[0]) != "reply" || bfrom[0] != ep {
		t.Fatalf("reply %q from %+v, want from %+v", back[0], bfrom[0], ep)
	}
	sent := uint64(0)
	for _, b := range out {
		sent += uint64(len(b))
	}
	if st := srv.Stats(); st.ConnsAccepted != 1 || st.TLSAccepted != 1 || st.TLSRxBytes != sent || st.TLSTxBytes != 5 {
		t.Fatalf("server stats %+v: want one accepted TLS connection, %d bytes in, 5 out", st, sent)
	}
	if st := cli.Stats(); st.TLSTxBytes != sent || st.TLSRxBytes != 5 {
		t.Fatalf("client stats %+v", st)
	}

	// Plain TCP on the same listener still works beside it.
	plain := conn.Endpoint{Dst: addr, Transport: conn.TransportTCP}
	if err := cli.Send([][]byte{[]byte("plain")}, plain); err != nil {
		t.Fatal(err)
	}
	got, from = recvN(t, srv, 1)
	if string(got[0]) != "plain" || from[0].Transport != conn.TransportTCP {
		t.Fatalf("plain frame %q from %+v", got[0], from[0])
	}
	if st := srv.Stats(); st.TLSRxBytes != sent || st.RxBytes != sent+5 {
		t.Fatalf("server stats %+v: the plain frame counted as TLS", st)
	}
}

// What a middlebox sees of the client: TLS 1.3, the server name it was
// given, ALPN offering h2 and http/1.1, as a browser's would.
func TestStreamTLSClientHello(t *testing.T) {
	hello := make(chan *tls.ClientHelloInfo, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		cfg := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			hello <- h
			return nil, net.ErrClosed
		}}
		tls.Server(c, cfg).Handshake()
	}()
	cli := conn.NewStream(conn.StreamOptions{})
	defer cli.Close()
	dst := ln.Addr().(*net.TCPAddr).AddrPort()
	cli.SetServerName(dst, "www.example.com")
	cli.Send([][]byte{{1, 2, 3}}, conn.Endpoint{Dst: dst, Transport: conn.TransportTLS})
	h := <-hello
	if h.ServerName != "www.example.com" {
		t.Errorf("SNI %q", h.ServerName)
	}
	if !slices.Equal(h.SupportedProtos, []string{"h2", "http/1.1"}) {
		t.Errorf("ALPN %q", h.SupportedProtos)
	}
	if !slices.Contains(h.SupportedVersions, tls.VersionTLS13) {
		t.Errorf("versions %x: no TLS 1.3", h.SupportedVersions)
	}
}

// Any TLS 1.3 client (not only a Stream) completes the handshake with the
// listener, as an active prober would, sees an ordinary server, and can
// then speak the framing.
func TestStreamTLSAnyClient(t *testing.T) {
	srv, addr := listenStream(t, conn.StreamOptions{})
	c, err := tls.Dial("tcp", addr.String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cs := c.ConnectionState()
	if cs.Version != tls.VersionTLS13 || cs.NegotiatedProtocol == "" || len(cs.PeerCertificates) != 1 {
		t.Fatalf("TLS %x, ALPN %q, %d certificates", cs.Version, cs.NegotiatedProtocol, len(cs.PeerCertificates))
	}
	f, _ := streamframe.Append(nil, []byte("hello"))
	c.Write(f)
	got, from := recvN(t, srv, 1)
	if string(got[0]) != "hello" || from[0].Transport != conn.TransportTLS {
		t.Fatalf("%q from %+v", got[0], from[0])
	}
}

// A certificate the user gives is the one served.
func TestStreamTLSUserCertificate(t *testing.T) {
	cert, err := conn.SelfSignedCertificate("vpn.example.org")
	if err != nil {
		t.Fatal(err)
	}
	s := conn.NewStream(conn.StreamOptions{})
	t.Cleanup(func() { s.Close() })
	port, err := s.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		c, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		pc := c.ConnectionState().PeerCertificates
		if len(pc) != 1 {
			t.Fatalf("%d certificates", len(pc))
		}
		return pc[0].Subject.CommonName
	}
	if cn := served(); cn != "" {
		t.Fatalf("self-signed certificate for %q", cn)
	}
	s.SetCertificate(&cert)
	if cn := served(); cn != "vpn.example.org" {
		t.Fatalf("served %q, not the user's certificate", cn)
	}
	s.SetCertificate(nil)
	if cn := served(); cn != "" {
		t.Fatalf("served %q after going back to self-signed", cn)
	}
}

// Drop closes the dialed connection of one transport to an address and
// leaves the other: the loser of a race goes, the winner stays.
func TestStreamDrop(t *testing.T) {
	srv, addr := listenStream(t, conn.StreamOptions{})
	cli := conn.NewStream(conn.StreamOptions{})
	defer cli.Close()
	tcp := conn.Endpoint{Dst: addr, Transport: conn.TransportTCP}
	tlsEp := conn.Endpoint{Dst: addr, Transport: conn.TransportTLS}
	cli.Send([][]byte{[]byte("tcp")}, tcp)
	cli.Send([][]byte{[]byte("tls")}, tlsEp)
	recvN(t, srv, 2)
	if n := cli.OpenConns(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	cli.Drop(tcp)
	if n := cli.OpenConns(); n != 1 {
		t.Fatalf("%d connections after the drop, want 1", n)
	}
	cli.Send([][]byte{[]byte("still")}, tlsEp)
	got, from := recvN(t, srv, 1)
	if string(got[0]) != "still" || from[0].Transport != conn.TransportTLS {
		t.Fatalf("%q from %+v", got[0], from[0])
	}
	if st := cli.Stats(); st.ConnsDialed != 2 {
		t.Fatalf("stats %+v: the TLS connection was redialed", st)
	}
}

// A source that begins TLS handshakes in a loop gets its burst, then each
// connection is closed before the server's handshake and counted; another
// source still gets through, and the first one's plain TCP is not limited.
func TestStreamTLSLimitPerSource(t *testing.T) {
	const burst = 3
	// No refill during the test: exactly the burst gets through.
	srv, addr := listenStream(t, conn.TunedStream(conn.StreamTuning{TLSBurst: burst, TLSEvery: time.Hour}))
	if c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).Dial("tcp", addr.String()); err != nil {
		t.Skipf("no second loopback source address: %v", err)
	} else {
		c.Close()
	}
	handshake := func(src net.IP) error {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 10 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", addr.String(), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
		if err != nil {
			return err
		}
		return c.Close()
	}
	one, two := net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2)
	for i := range burst {
		if err := handshake(one); err != nil {
			t.Fatalf("handshake %d of the burst: %v", i+1, err)
		}
	}
	const over = 5
	for i := range over {
		if err := handshake(one); err == nil {
			t.Fatalf("handshake %d past the burst completed", i+1)
		}
	}
	if err := handshake(two); err != nil {
		t.Fatalf("another source was limited too: %v", err)
	}
	waitFor(t, "the handshakes to be counted", func() bool { return srv.Stats().TLSAccepted == burst+1 })
	if st := srv.Stats(); st.TLSLimited != over || st.BadFrames != 0 || st.ConnsAccepted != burst+over+2 {
		t.Fatalf("stats %+v: want %d limited, none counted as bad, %d accepted", st, over, burst+over+2)
	}
	checkServes(t, srv, addr)
}
