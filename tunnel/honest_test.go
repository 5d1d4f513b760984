package tunnel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tunnel"
)

// lone opens a tunnel at addrs (wg-quick's Address line) whose one peer
// routes 10.1.0.0/24 and fd01::/64 at an endpoint where nobody answers.
func lone(t *testing.T, addrs string) *tunnel.Tunnel {
	t.Helper()
	k, peer := newKey(), newKey()
	return open(t, fmt.Appendf(nil, "[Interface]\nPrivateKey = %s\nAddress = %s\nDNS = 10.1.0.53\n"+
		"[Peer]\nPublicKey = %s\nAllowedIPs = 10.1.0.0/24, fd01::/64\nEndpoint = 127.0.0.1:9\n",
		k.private, addrs, peer.public), tunnel.Options{Logf: t.Logf})
}

// isClosed fails t unless err says the tunnel is closed (net.ErrClosed)
// and names op.
func isClosed(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("%s after Close: %v, want net.ErrClosed", op, err)
		return
	}
	if !strings.Contains(err.Error(), op) {
		t.Errorf("%s after Close: %q does not name the operation", op, err)
	}
}

// WaitHandshake does not report success when Close ends its wait.
func TestWaitHandshakeClosedWhileWaiting(t *testing.T) {
	tn := lone(t, "10.1.0.1/24")
	errc := make(chan error, 1)
	go func() { errc <- tn.WaitHandshake(context.Background()) }()
	tn.Close()
	isClosed(t, "handshake", <-errc)
}

// Every operation on a closed tunnel says it is closed, as net.ErrClosed.
func TestClosedSaysSo(t *testing.T) {
	tn := lone(t, "10.1.0.1/24")
	tn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	isClosed(t, "handshake", tn.WaitHandshake(ctx))
	_, err := tn.DialContext(ctx, "tcp", "10.1.0.2:80")
	isClosed(t, "dial", err)
	_, err = tn.DialContext(ctx, "udp", "10.1.0.2:53")
	isClosed(t, "dial", err)
	_, err = tn.DialContext(ctx, "tcp", "web.test:80")
	isClosed(t, "dial", err)
	_, err = tn.Listen("tcp", ":80")
	isClosed(t, "listen", err)
	_, err = tn.ListenPacket("udp", ":53")
	isClosed(t, "listen", err)
	_, err = tn.Ping(ctx, netip.MustParseAddr("10.1.0.2"))
	isClosed(t, "ping", err)
	_, err = tn.LookupNetIP(ctx, "ip", "web.test")
	isClosed(t, "lookup", err)
	err = tn.Apply(&device.Config{})
	isClosed(t, "apply", err)
	if !errors.Is(err, device.ErrClosed) {
		t.Errorf("Apply after Close: %v no longer matches device.ErrClosed", err)
	}
}

// A dial or ping to an address no peer routes fails at once with
// ErrNoRoute, naming the address, instead of waiting out ctx; the
// tunnel's own addresses and routed ones are not refused.
func TestUnroutedFailsAtOnce(t *testing.T) {
	tn := lone(t, "10.1.0.1/24")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, network := range []string{"tcp", "udp4"} {
		_, err := tn.DialContext(ctx, network, "10.9.9.9:80")
		var op *net.OpError
		if !errors.Is(err, tunnel.ErrNoRoute) || !errors.As(err, &op) || op.Addr == nil || op.Addr.String() != "10.9.9.9:80" {
			t.Errorf("dial %s to an unrouted address: %v, want a *net.OpError for 10.9.9.9:80 matching ErrNoRoute", network, err)
		}
	}
	_, err := tn.Ping(ctx, netip.MustParseAddr("10.9.9.9"))
	if !errors.Is(err, tunnel.ErrNoRoute) || !strings.Contains(fmt.Sprint(err), "10.9.9.9") {
		t.Errorf("ping to an unrouted address: %v, want ErrNoRoute naming it", err)
	}
	c, err := tn.DialContext(ctx, "udp", "10.1.0.2:9")
	if err != nil {
		t.Errorf("dial udp to a routed address: %v", err)
	} else {
		c.Close()
	}
	ln, err := tn.Listen("tcp", "10.1.0.1:7000")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err = tn.DialContext(ctx, "tcp", "10.1.0.1:7000")
	if err != nil {
		t.Fatalf("dial to the tunnel's own address: %v", err)
	}
	c.Close()
	pc, err := tn.ListenPacket("udp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	_, err = pc.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(netip.MustParseAddrPort("10.9.9.9:53")))
	if !errors.Is(err, tunnel.ErrNoRoute) {
		t.Errorf("WriteTo an unrouted address: %v, want ErrNoRoute", err)
	}
}

// Listen refuses an address the tunnel does not own and a family it has
// not, and a listener's address is a real one.
func TestListenOnlyWhatItServes(t *testing.T) {
	tn := lone(t, "10.1.0.1/24")
	for _, bad := range [][2]string{{"tcp", "10.9.9.9:6002"}, {"tcp6", ":6001"}, {"tcp", "[fd01::1]:6001"}} {
		if ln, err := tn.Listen(bad[0], bad[1]); err == nil {
			ln.Close()
			t.Errorf("Listen(%q, %q) was accepted", bad[0], bad[1])
		}
	}
	for _, bad := range [][2]string{{"udp", "10.9.9.9:6002"}, {"udp6", ":6001"}} {
		if pc, err := tn.ListenPacket(bad[0], bad[1]); err == nil {
			pc.Close()
			t.Errorf("ListenPacket(%q, %q) was accepted", bad[0], bad[1])
		}
	}
	ln, err := tn.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err != nil || ap.Addr() != netip.MustParseAddr("10.1.0.1") || ap.Port() == 0 {
		t.Errorf("Listen(:0).Addr() = %q, want 10.1.0.1 and a port", ln.Addr())
	}
	pc, err := tn.ListenPacket("udp4", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if ap, err := netip.ParseAddrPort(pc.LocalAddr().String()); err != nil || ap.Addr() != netip.MustParseAddr("10.1.0.1") || ap.Port() == 0 {
		t.Errorf("ListenPacket(:0).LocalAddr() = %q, want 10.1.0.1 and a port", pc.LocalAddr())
	}
}

// On a dual-stack tunnel, "tcp" and "udp" with ":port" serve both
// families; "tcp4" and "tcp6" one each; Close leaves no goroutine.
func TestListenBothFamilies(t *testing.T) {
	leakcheck.Check(t)
	tn := lone(t, "10.1.0.1/24, fd01::1/64")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := tn.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	port := netip.MustParseAddrPort(ln.Addr().String()).Port()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprint(c, c.LocalAddr())
			c.Close()
		}
	}()
	for _, a := range []string{"10.1.0.1", "fd01::1"} {
		ap := netip.AddrPortFrom(netip.MustParseAddr(a), port)
		c, err := tn.DialContext(ctx, "tcp", ap.String())
		if err != nil {
			t.Fatalf("dial %v: %v", ap, err)
		}
		got, _ := io.ReadAll(c)
		c.Close()
		if string(got) != ap.String() {
			t.Errorf("dial %v reached %q", ap, got)
		}
	}
	ln.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if ln, err := tn.Listen("tcp", fmt.Sprint(":", port)); err != nil {
		t.Errorf("the port is still taken after Close: %v", err)
	} else {
		ln.Close()
	}

	pc, err := tn.ListenPacket("udp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	port = netip.MustParseAddrPort(pc.LocalAddr().String()).Port()
	for _, a := range []string{"10.1.0.1", "fd01::1"} {
		ap := netip.AddrPortFrom(netip.MustParseAddr(a), port)
		c, err := tn.DialContext(ctx, "udp", ap.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(a)); err != nil {
			t.Fatal(err)
		}
		pc.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 100)
		n, from, err := pc.ReadFrom(buf)
		if err != nil || string(buf[:n]) != a {
			t.Fatalf("ReadFrom: %q, %v; want %q", buf[:n], err, a)
		}
		if _, err := pc.WriteTo([]byte("re "+a), from); err != nil {
			t.Fatal(err)
		}
		n, err = c.Read(buf)
		if err != nil || string(buf[:n]) != "re "+a {
			t.Fatalf("reply: %q, %v", buf[:n], err)
		}
	}
	pc.SetReadDeadline(time.Now().Add(time.Millisecond))
	if _, _, err := pc.ReadFrom(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("ReadFrom past the deadline: %v", err)
	}
	pc.Close()
	if _, _, err := pc.ReadFrom(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadFrom after Close: %v, want net.ErrClosed", err)
	}
	if ln, err := tn.Listen("tcp4", ":0"); err != nil || !netip.MustParseAddrPort(ln.Addr().String()).Addr().Is4() {
		t.Errorf("tcp4: %v", err)
	} else {
		ln.Close()
	}
	tn.Close()
}

// WhoIs names the peer a remote address belongs to, by the longest of the
// peers' allowed IPs, as the device routes.
func TestWhoIs(t *testing.T) {
	k, wide, narrow := newKey(), newKey(), newKey()
	tn := open(t, fmt.Appendf(nil, "[Interface]\nPrivateKey = %s\nAddress = 10.1.0.1/24\n"+
		"[Peer]\nPublicKey = %s\nAllowedIPs = 10.1.0.0/24\nEndpoint = 127.0.0.1:9\n"+
		"[Peer]\nPublicKey = %s\nAllowedIPs = 10.1.0.7/32\n",
		k.private, wide.public, narrow.public), tunnel.Options{})
	for _, tc := range []struct {
		addr string
		want string
	}{{"10.1.0.2", wide.public}, {"10.1.0.7", narrow.public}, {"::ffff:10.1.0.7", narrow.public}, {"10.9.9.9", ""}} {
		p, ok := tn.WhoIs(netip.MustParseAddr(tc.addr))
		if ok != (tc.want != "") || (ok && p.PublicKey.Base64() != tc.want) {
			t.Errorf("WhoIs(%s) = %v, %v; want %s", tc.addr, p.PublicKey, ok, tc.want)
		}
	}
	p, _ := tn.WhoIs(netip.MustParseAddr("10.1.0.2"))
	if p.Endpoint.String() != "127.0.0.1:9" || len(p.AllowedIPs) != 1 || p.AllowedIPs[0].String() != "10.1.0.0/24" {
		t.Errorf("WhoIs(10.1.0.2) = %+v", p)
	}
}

// A key made by the package chains to its public key, which is the
// Curve25519 one, and two keys differ.
func TestNewPrivateKey(t *testing.T) {
	a, b := tunnel.NewPrivateKey(), tunnel.NewPrivateKey()
	if a == b || a.IsZero() {
		t.Fatal("two calls gave the same key, or a zero one")
	}
	pub := tunnel.NewPrivateKey().PublicKey()
	if pub.IsZero() {
		t.Fatal("zero public key")
	}
	ap := a.PublicKey()
	if ap != a.PublicKey() || ap == b.PublicKey() {
		t.Fatal("PublicKey is not a function of the private key")
	}
}
