package socks5

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/app/proxy/proxytest"
)

// startServer runs a server on loopback whose tunnel is the loopback
// itself unless o has a Dial, logging to t unless o has a Logf.
func startServer(t *testing.T, o Options) (*Server, string) {
	t.Helper()
	if o.Dial == nil {
		o.Dial = func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ap.String())
		}
	}
	if o.ListenUDP == nil {
		o.ListenUDP = func(bool) (net.PacketConn, error) { return net.ListenPacket("udp", "127.0.0.1:0") }
	}
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	s := New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, ln.Addr().String()
}

func echoTCP(t *testing.T) netip.AddrPort {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// dialSOCKS performs the client side up to the reply and returns it.
func dialSOCKS(t *testing.T, server string, user, pass string, req Request) (net.Conn, byte, Addr) {
	t.Helper()
	c, err := net.Dial("tcp", server)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	method := byte(MethodNoAuth)
	if user != "" {
		method = MethodUserPass
	}
	c.Write([]byte{5, 1, method})
	var mr [2]byte
	if _, err := io.ReadFull(c, mr[:]); err != nil || mr[1] != method {
		c.Close()
		return nil, 0xff, Addr{}
	}
	if user != "" {
		c.Write(append(append(append([]byte{1, byte(len(user))}, user...), byte(len(pass))), pass...))
		var ar [2]byte
		if _, err := io.ReadFull(c, ar[:]); err != nil || ar[1] != 0 {
			c.Close()
			return nil, 0xfe, Addr{}
		}
	}
	b, _ := AppendRequest(nil, req)
	c.Write(b)
	var h [3]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	a, err := readAddr(c)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Time{})
	return c, h[1], a
}

func TestConnectWithAuth(t *testing.T) {
	echo := echoTCP(t)
	_, addr := startServer(t, Options{Username: "u", Password: "secret"})
	c, rep, _ := dialSOCKS(t, addr, "u", "secret", Request{Cmd: CmdConnect, Addr: AddrFrom(echo)})
	if rep != RepSucceeded {
		t.Fatalf("reply %d", rep)
	}
	defer c.Close()
	msg := bytes.Repeat([]byte("0123456789"), 100000)
	go c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo through the proxy: %v", err)
	}
	if _, rep, _ := dialSOCKS(t, addr, "u", "wrong", Request{Cmd: CmdConnect, Addr: AddrFrom(echo)}); rep != 0xfe {
		t.Fatalf("wrong password: reply %d, want an authentication failure", rep)
	}
}

func TestConnectNames(t *testing.T) {
	echo := echoTCP(t)
	_, addr := startServer(t, Options{Resolve: func(ctx context.Context, host string) (netip.Addr, error) {
		return netip.MustParseAddr("127.0.0.1"), nil
	}})
	c, rep, _ := dialSOCKS(t, addr, "", "", Request{Cmd: CmdConnect, Addr: Addr{Host: "echo.test", Port: echo.Port()}})
	if rep != RepSucceeded {
		t.Fatalf("reply %d", rep)
	}
	c.Close()
	_, addr2 := startServer(t, Options{})
	if _, rep, _ := dialSOCKS(t, addr2, "", "", Request{Cmd: CmdConnect, Addr: Addr{Host: "echo.test", Port: 1}}); rep != RepHostUnreachable {
		t.Fatalf("name without a resolver: reply %d", rep)
	}
}

func TestMalformedClosed(t *testing.T) {
	s, addr := startServer(t, Options{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	got, err := io.ReadAll(c)
	if err != nil || len(got) < 2 || got[0] != 5 || got[1] != RepGeneralFailure {
		t.Fatalf("got % x, %v; want a SOCKS failure reply, then EOF", got, err)
	}
	if s.Stats().ProtocolErrors != 1 {
		t.Fatalf("stats %+v", s.Stats())
	}
}

func TestTooManyRefused(t *testing.T) {
	echo := echoTCP(t)
	s, addr := startServer(t, Options{MaxConns: 1})
	c, rep, _ := dialSOCKS(t, addr, "", "", Request{Cmd: CmdConnect, Addr: AddrFrom(echo)})
	if rep != RepSucceeded {
		t.Fatalf("first: reply %d", rep)
	}
	defer c.Close()
	c2, rep, _ := dialSOCKS(t, addr, "", "", Request{Cmd: CmdConnect, Addr: AddrFrom(echo)})
	if rep != RepGeneralFailure {
		t.Fatalf("over the limit: reply %d, want general failure", rep)
	}
	if _, err := c2.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("over the limit: connection not closed: %v", err)
	}
	if s.Stats().Refused != 1 {
		t.Fatalf("stats %+v", s.Stats())
	}
}

func TestUDPAssociate(t *testing.T) {
	echo, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFrom(b)
			if err != nil {
				return
			}
			echo.WriteTo(b[:n], from)
		}
	}()
	echoAP := netip.MustParseAddrPort(echo.LocalAddr().String())
	s, addr := startServer(t, Options{})
	ctl, rep, bound := dialSOCKS(t, addr, "", "", Request{Cmd: CmdUDPAssociate, Addr: Addr{IP: netip.IPv4Unspecified()}})
	if rep != RepSucceeded || !bound.IP.IsLoopback() {
		t.Fatalf("reply %d, bound %v", rep, bound)
	}
	defer ctl.Close()
	relay := net.UDPAddrFromAddrPort(netip.AddrPortFrom(bound.IP, bound.Port))
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.SetDeadline(time.Now().Add(10 * time.Second))
	d, _ := AppendUDPHeader(nil, AddrFrom(echoAP))
	d = append(d, "ping over socks"...)
	u.WriteTo(d, relay)
	b := make([]byte, 2048)
	n, _, err := u.ReadFrom(b)
	if err != nil {
		t.Fatal(err)
	}
	from, p, err := ParseUDP(b[:n])
	if err != nil || string(p) != "ping over socks" || from != AddrFrom(echoAP) {
		t.Fatalf("reply from %v %q %v", from, p, err)
	}
	// Another socket on the same host is not the client: dropped.
	other, _ := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	defer other.Close()
	other.WriteTo(d, relay)
	u.WriteTo([]byte{0, 0, 1, 1, 127, 0, 0, 1, 0, 7}, relay) // a fragment: dropped
	u.WriteTo(d, relay)                                      // and the client still gets through
	if _, _, err := u.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.UDPForeign != 1 || st.UDPMalformed != 1 {
		t.Fatalf("stats %+v, want one foreign and one malformed datagram dropped", st)
	}
}

// Shutting down ends open connections instead of waiting out their idle
// timeout.
func TestServeEndsConnectionsOnShutdown(t *testing.T) {
	echo := echoTCP(t)
	s := New(Options{Dial: func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ap.String())
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	c, rep, _ := dialSOCKS(t, ln.Addr().String(), "", "", Request{Cmd: CmdConnect, Addr: AddrFrom(echo)})
	if rep != RepSucceeded {
		t.Fatalf("reply %d", rep)
	}
	defer c.Close()
	half, _ := net.Dial("tcp", ln.Addr().String()) // stuck in the handshake
	defer half.Close()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still waiting for its connections 5 s after shutdown")
	}
}

// TestPanicCostsItsConnectionOnly: a bug while serving one client (here a
// Dial that panics) closes that client's connection, is logged, and the
// server serves on.
func TestPanicCostsItsConnectionOnly(t *testing.T) {
	echo := echoTCP(t)
	var log proxytest.Log
	_, addr := startServer(t, Options{Dial: proxytest.PanicOnceDial(), Logf: log.Logf})

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte{5, 1, MethodNoAuth})
	var mr [2]byte
	if _, err := io.ReadFull(c, mr[:]); err != nil {
		t.Fatal(err)
	}
	b, _ := AppendRequest(nil, Request{Cmd: CmdConnect, Addr: AddrFrom(echo)})
	c.Write(b)
	if n, err := io.ReadFull(c, make([]byte, 3)); err == nil {
		t.Fatalf("the request whose dial panicked got a reply (%d bytes)", n)
	}
	c2, rep, _ := dialSOCKS(t, addr, "", "", Request{Cmd: CmdConnect, Addr: AddrFrom(echo)})
	if rep != RepSucceeded {
		t.Fatalf("after the panic: reply %d", rep)
	}
	c2.Close()
	if n := log.Count("panic serving"); n != 1 {
		t.Fatalf("%d panic lines logged, want 1", n)
	}
}

// TestIdleHandshakesDoNotHoldSlots: connections that have sent nothing
// yet do not keep a client out at the cap: the one idle longest is closed
// and the new client served.
func TestIdleHandshakesDoNotHoldSlots(t *testing.T) {
	echo := echoTCP(t)
	_, addr := startServer(t, Options{MaxConns: 2})
	var idle []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	// No wait for the server to take their slots: it accepts in order,
	// so theirs come before the next one's.
	c, rep, _ := dialSOCKS(t, addr, "", "", Request{Cmd: CmdConnect, Addr: AddrFrom(echo)})
	if rep != RepSucceeded {
		t.Fatalf("beside two idle connections: reply %d, want success", rep)
	}
	defer c.Close()
	c.Write([]byte("x"))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	idle[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the oldest idle connection: %v, want it closed", err)
	}
}
