package exit

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/netstack"
)

var (
	clientAddr  = netip.MustParseAddr("10.0.0.2")
	exitAddr    = netip.MustParseAddr("10.0.0.1")
	clientAddr6 = netip.MustParseAddr("fd00::2")
	exitAddr6   = netip.MustParseAddr("fd00::1")
)

// wire moves packets from one stack to the other until Read fails, as
// the tunnel would.
func wire(from, to *netstack.Net) {
	mtu, _ := from.MTU()
	bufs := make([][]byte, from.BatchSize())
	pkts := make([][]byte, len(bufs))
	sizes := make([]int, len(bufs))
	for i := range bufs {
		bufs[i] = make([]byte, tun.Headroom+mtu)
	}
	for {
		n, err := from.Read(bufs, sizes, tun.Headroom)
		if err != nil {
			return
		}
		for i := range n {
			pkts[i] = bufs[i][:tun.Headroom+sizes[i]]
		}
		if _, err := to.Write(pkts[:n], tun.Headroom); err != nil {
			return
		}
	}
}

// setup is a client stack wired to an exit stack; the exit may reach
// 127.0.0.1 (named in its allow list), not 203.0.113.0/24, and relays
// DNS to dns.
func setup(t testing.TB, dns netip.AddrPort) (*netstack.Net, *Exit) {
	t.Helper()
	return setupWith(t, func(o *Options) { o.DNS = []netip.AddrPort{dns} })
}

// setupWith is setup with the exit's options changed by edit.
func setupWith(t testing.TB, edit func(*Options)) (*netstack.Net, *Exit) {
	t.Helper()
	// The client is promiscuous only so that it takes replies from
	// 127.0.0.1, which a kernel would drop as martians.
	client, err := netstack.New(netstack.Options{Addresses: []netip.Addr{clientAddr, clientAddr6}, Promiscuous: true})
	if err != nil {
		t.Fatal(err)
	}
	exitNet, err := netstack.New(netstack.Options{Addresses: []netip.Addr{exitAddr, exitAddr6}, Promiscuous: true})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { wire(client, exitNet) })
	wg.Go(func() { wire(exitNet, client) })
	// Tests dial only loopback; the rest is to see refusals.
	pol := NewPolicy(PolicyOptions{Allow: pfx("0.0.0.0/0", "127.0.0.1/32", "::1/128"), Deny: pfx("203.0.113.0/24"), Tunnel: []netip.Addr{exitAddr, exitAddr6}})
	o := Options{
		Policy: pol, Tunnel: []netip.Addr{exitAddr, exitAddr6},
		PeerOf: func(a netip.Addr) (string, bool) { return "client", a == clientAddr || a == clientAddr6 },
		Logf:   func(string, ...any) {},
	}
	edit(&o)
	e, err := Start(exitNet, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		client.Close()
		exitNet.Close()
		wg.Wait()
	})
	return client, e
}

// ctx bounds a dial so that a broken relay fails the test instead of
// hanging it.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func listenTCP(t *testing.T, serve func(net.Conn)) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); serve(c) })
		}
	})
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

func counter(e *Exit, name string) uint64 {
	for _, c := range e.Counters() {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}

// TestExitTCP sends 8 MiB through the relay to an echo server and back,
// both directions at once, and checks every byte and the counters.
func TestExitTCP(t *testing.T) {
	echo := listenTCP(t, func(c net.Conn) { io.Copy(c, c); c.(*net.TCPConn).CloseWrite() })
	client, e := setup(t, netip.AddrPort{})
	c, err := client.DialTCPAddrPort(ctx(t), echo)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := make([]byte, 8<<20)
	rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.(interface{ CloseWrite() error }).CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echo: got %d bytes, want the %d sent", len(got), len(data))
	}
	if up, down := counter(e, "exit_bytes_to_host"), counter(e, "exit_bytes_to_peer"); up != uint64(len(data)) || down != uint64(len(data)) {
		t.Errorf("bytes to host %d, to peer %d; want %d each", up, down, len(data))
	}
	if n := counter(e, "exit_tcp_flows_opened"); n != 1 {
		t.Errorf("tcp flows opened %d, want 1", n)
	}
}

// TestExitHalfClose: the client shuts its write side and still reads the
// server's reply, which the server sends only after seeing the FIN.
func TestExitHalfClose(t *testing.T) {
	srv := listenTCP(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		io.WriteString(c, "got "+string(rune('0'+n)))
	})
	client, _ := setup(t, netip.AddrPort{})
	c, err := client.DialTCPAddrPort(ctx(t), srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "hello")
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "got 5" {
		t.Fatalf("reply %q, %v; want \"got 5\"", got, err)
	}
}

// TestExitReset: a host server that resets its connection resets the
// peer's.
func TestExitReset(t *testing.T) {
	srv := listenTCP(t, func(c net.Conn) {
		io.ReadFull(c, make([]byte, 1))
		abortTCP(c.(*net.TCPConn))
	})
	client, _ := setup(t, netip.AddrPort{})
	c, err := client.DialTCPAddrPort(ctx(t), srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{1})
	_, err = io.ReadAll(c)
	if err == nil || !errors.Is(err, syscall.ECONNRESET) && !isReset(err) {
		t.Fatalf("read after the server's reset: %v, want connection reset", err)
	}
}

func isReset(err error) bool {
	return err != nil && bytes.Contains([]byte(err.Error()), []byte("reset"))
}

// TestExitRefusals: a closed port and a destination the policy denies are
// both answered with a RST, and counted by reason.
func TestExitRefusals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	client, e := setup(t, netip.AddrPort{})
	for _, tc := range []struct {
		dst  netip.AddrPort
		want Reason
	}{
		{closed, ReasonConnRefused},
		{netip.MustParseAddrPort("127.0.0.2:80"), ReasonLoopback},
		{netip.MustParseAddrPort("169.254.169.254:80"), ReasonLinkLocal},
		{netip.MustParseAddrPort("203.0.113.1:80"), ReasonDenied},
		{netip.AddrPortFrom(exitAddr, 80), ReasonSelf},
	} {
		_, err := client.DialTCPAddrPort(ctx(t), tc.dst)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("refused")) {
			t.Errorf("dial %v: %v, want connection refused", tc.dst, err)
		}
		if n := e.Refused(tc.want); n != 1 {
			t.Errorf("dial %v: refused for %v counted %d times, want 1", tc.dst, tc.want, n)
		}
	}
}

// TestExitUDP: a round trip to a host UDP echo server, and DNS sent to
// the exit's tunnel address relayed to the host's resolver, whose flow
// ends with the answer.
func TestExitUDP(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("echo "), buf[:n]...), from)
		}
	}()
	srv := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	client, e := setup(t, srv)
	for _, dst := range []netip.AddrPort{srv, netip.AddrPortFrom(exitAddr, 53)} {
		c, err := client.DialUDPAddrPort(netip.AddrPort{}, dst)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("ping"))
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		c.Close()
		if err != nil || string(buf[:n]) != "echo ping" {
			t.Fatalf("udp to %v: %q, %v", dst, buf[:n], err)
		}
	}
	if n := counter(e, "exit_udp_flows_opened"); n != 2 {
		t.Errorf("udp flows opened %d, want 2", n)
	}
	// The DNS flow ends with its answer; the other waits for its idle
	// timeout.
	for counter(e, "exit_udp_flows_open") != 1 {
		time.Sleep(time.Millisecond)
	}
}

// UDP to a closed host port: the host's ICMP port unreachable is relayed
// to the peer (counted), and the flow stays open for later replies.
func TestExitUDPPortUnreachable(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dst := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	pc.Close()
	client, e := setup(t, dst)
	c, err := client.DialUDPAddrPort(netip.AddrPort{}, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for try := 0; counter(e, "exit_port_unreachables_to_peer") == 0; try++ {
		if try == 1000 {
			t.Fatal("no port unreachable relayed after 1000 datagrams")
		}
		c.Write([]byte("anyone?"))
		time.Sleep(10 * time.Millisecond)
	}
	// The peer's stack took it: its socket reports the refusal.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 64)); !errors.Is(err, syscall.ECONNREFUSED) && (err == nil || !strings.Contains(err.Error(), "refused")) {
		t.Fatalf("peer's read: %v, want connection refused", err)
	}
	if n := counter(e, "exit_udp_flows_open"); n != 1 {
		t.Errorf("udp flows open %d, want 1", n)
	}
}

// TestExitPing: an echo request to the host's loopback is answered
// through a ping socket where the host allows them, and refused and
// counted where it does not.
func TestExitPing(t *testing.T) {
	client, e := setup(t, netip.AddrPort{})
	pctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := client.Ping(pctx, netip.MustParseAddr("127.0.0.1"), 1, []byte("ping through the exit"))
	if probePing() != nil {
		if err == nil || e.Refused(ReasonPingUnavailable) == 0 {
			t.Fatalf("no ping sockets here: ping %v, refusals %d; want no reply and a counted refusal", err, e.Refused(ReasonPingUnavailable))
		}
		t.Logf("ping sockets unavailable here; checked the refusal only")
		return
	}
	if err != nil {
		t.Fatalf("ping 127.0.0.1 through the exit: %v", err)
	}
	if n := counter(e, "exit_icmp_flows_opened"); n != 1 {
		t.Errorf("icmp flows opened %d, want 1", n)
	}
}

// TestExitFlowCaps: past the per-peer cap a SYN gets a RST and a datagram
// is refused, both counted; a flow that ends frees its slot.
func TestExitFlowCaps(t *testing.T) {
	srv := listenTCP(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	client, e := setupWith(t, func(o *Options) { o.MaxFlowsPerPeer = 1 })
	c, err := client.DialTCPAddrPort(ctx(t), srv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.DialTCPAddrPort(ctx(t), srv); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("second flow: %v, want connection refused", err)
	}
	if n := e.Refused(ReasonPeerCap); n != 1 {
		t.Fatalf("peer_flow_cap counted %d, want 1", n)
	}
	u, err := client.DialUDPAddrPort(netip.AddrPort{}, netip.MustParseAddrPort("127.0.0.1:9"))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.Write([]byte("x"))
	// The refusal comes back as an ICMP port unreachable; wait for the
	// count rather than for time.
	for e.Refused(ReasonPeerCap) != 2 {
		time.Sleep(time.Millisecond)
	}
	c.Close()
	for counter(e, "exit_tcp_flows_open") != 0 {
		time.Sleep(time.Millisecond)
	}
	c2, err := client.DialTCPAddrPort(ctx(t), srv)
	if err != nil {
		t.Fatalf("after the first flow ended: %v", err)
	}
	c2.Close()
}

// TestExitCloseEndsFlows: Close resets the flows it carries and refuses
// new ones.
func TestExitCloseEndsFlows(t *testing.T) {
	srv := listenTCP(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	client, e := setup(t, netip.AddrPort{})
	c, err := client.DialTCPAddrPort(ctx(t), srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e.Close()
	if _, err := io.ReadAll(c); err == nil {
		t.Fatal("a flow open at Close ended cleanly, want a reset")
	}
	if _, err := client.DialTCPAddrPort(ctx(t), srv); err == nil {
		t.Fatal("a flow opened after Close")
	}
	if n := e.Refused(ReasonClosing); n != 1 {
		t.Fatalf("closing refusals %d, want 1", n)
	}
}

// TestExitIPv6: TCP and UDP to the host's ::1 (named in the allow list).
func TestExitIPv6(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	pc, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			pc.WriteTo(b[:n], from)
		}
	}()
	client, _ := setup(t, netip.AddrPort{})
	c, err := client.DialTCPAddrPort(ctx(t), ln.Addr().(*net.TCPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "over IPv6")
	got := make([]byte, 9)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "over IPv6" {
		t.Fatalf("tcp echo %q, %v", got, err)
	}
	u, err := client.DialUDPAddrPort(netip.AddrPort{}, pc.LocalAddr().(*net.UDPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.Write([]byte("datagram"))
	n, err := u.Read(got)
	if err != nil || string(got[:n]) != "datagram" {
		t.Fatalf("udp echo %q, %v", got[:n], err)
	}
}
