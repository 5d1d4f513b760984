package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/app/rootless"
	"github.com/fips-go/fips-go/internal/testkit/dnstest"
)

func TestParseForward(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want rootless.Forward
		ok   bool
	}{
		{"127.0.0.1:8080=10.0.0.1:80", rootless.Forward{Local: "127.0.0.1:8080", Remote: netip.MustParseAddrPort("10.0.0.1:80")}, true},
		{"8080=10.0.0.1:80", rootless.Forward{Local: "127.0.0.1:8080", Remote: netip.MustParseAddrPort("10.0.0.1:80")}, true},
		{"tcp::8080=10.0.0.1:80", rootless.Forward{Local: "127.0.0.1:8080", Remote: netip.MustParseAddrPort("10.0.0.1:80")}, true},
		{"udp:5353=10.0.0.1:53", rootless.Forward{UDP: true, Local: "127.0.0.1:5353", Remote: netip.MustParseAddrPort("10.0.0.1:53")}, true},
		{"10.0.0.1:22", rootless.Forward{Local: "127.0.0.1:22", Remote: netip.MustParseAddrPort("10.0.0.1:22")}, true},
		{"0.0.0.0:22=10.0.0.1:22", rootless.Forward{Local: "0.0.0.0:22", Remote: netip.MustParseAddrPort("10.0.0.1:22")}, true},
		{"8080=peer:80", rootless.Forward{}, false},
		{"8080=10.0.0.1:0", rootless.Forward{}, false},
	} {
		got, err := parseForward(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("%q: %+v, %v", tc.in, got, err)
		}
	}
	if r, err := parseReverse("9000=8080"); err != nil || r != (rootless.Reverse{Port: 9000, Local: "127.0.0.1:8080"}) {
		t.Errorf("reverse: %+v %v", r, err)
	}
	if r, err := parseReverse("tcp:9000=8080"); err != nil || r != (rootless.Reverse{Port: 9000, Local: "127.0.0.1:8080"}) {
		t.Errorf("reverse tcp: %+v %v", r, err)
	}
	if r, err := parseReverse("udp:5353=10.1.1.1:53"); err != nil || r != (rootless.Reverse{UDP: true, Port: 5353, Local: "10.1.1.1:53"}) {
		t.Errorf("reverse udp: %+v %v", r, err)
	}
	for _, bad := range []string{"9000", "0=80", "x=80", "70000=80", "9000=", "udp:9000", "sctp:9000=80"} {
		if _, err := parseReverse(bad); err == nil {
			t.Errorf("-R %q accepted", bad)
		}
	}
}

// The netstack modes in one process, without root: -L udp into the
// tunnel, -R out of it, and SOCKS5 CONNECT with a name resolved by a DNS
// server inside the tunnel.
func TestUserspaceNetstackModes(t *testing.T) {
	far, err := newBenchNode(netip.MustParseAddr("10.0.0.1"), 1420)
	if err != nil {
		t.Fatal(err)
	}
	defer far.close()
	uecho, err := far.ns.ListenUDPAddrPort(netip.MustParseAddrPort("10.0.0.1:7"))
	if err != nil {
		t.Fatal(err)
	}
	defer uecho.Close()
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := uecho.ReadFrom(b)
			if err != nil {
				return
			}
			uecho.WriteTo(b[:n], from)
		}
	}()
	dns, err := far.ns.ListenUDPAddrPort(netip.MustParseAddrPort("10.0.0.1:53"))
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	go dnstest.Serve(dns, "echo.tunnel.", netip.MustParseAddr("10.0.0.1"))
	techo, err := far.ns.ListenTCPAddrPort(netip.MustParseAddrPort("10.0.0.1:7"))
	if err != nil {
		t.Fatal(err)
	}
	defer techo.Close()
	go acceptEcho(techo)
	// A local service for -R.
	local, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	go acceptEcho(local)
	// And one for -R udp.
	ulocal, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ulocal.Close()
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := ulocal.ReadFrom(b)
			if err != nil {
				return
			}
			ulocal.WriteTo(b[:n], from)
		}
	}()

	near, err := newBenchNode(netip.MustParseAddr("10.0.0.9"), 1420)
	if err != nil {
		t.Fatal(err)
	}
	near.close()
	conf := filepath.Join(t.TempDir(), "wg0.conf")
	text := fmt.Sprintf("[Interface]\nPrivateKey = %s\nAddress = 10.0.0.2/24\nDNS = 10.0.0.1\n\n[Peer]\nPublicKey = %s\nEndpoint = 127.0.0.1:%d\nAllowedIPs = 10.0.0.0/24\n",
		near.key.Base64(), far.key.PublicKey().String(), far.dev.Status().ListenPort)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := far.peerWithKey(near.key.PublicKey(), netip.MustParseAddr("10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan []net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- runUserspaceArgs(ctx, newApp(), []string{"fips-go", "userspace", "-c", conf, "--socket-dir", "none",
			"-L", "udp:127.0.0.1:0=10.0.0.1:7", "-R", "9000=" + local.Addr().String(), "-R", "udp:9001=" + ulocal.LocalAddr().String(), "--socks5", "127.0.0.1:0"},
			func(a []net.Addr) { ready <- a })
	}()
	var locals []net.Addr
	select {
	case locals = <-ready:
	case err := <-done:
		t.Fatalf("userspace exited: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready in 10 s")
	}

	// -L udp
	u, err := net.Dial("udp", locals[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if !udpEchoes(u, "through -L udp") {
		t.Fatal("no echo through -L udp")
	}
	// -R: the far side connects to us inside the tunnel.
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	rc, err := far.ns.DialTCPAddrPort(dctx, netip.MustParseAddrPort("10.0.0.2:9000"))
	if err != nil {
		t.Fatal(err)
	}
	expectEcho(t, rc, "through -R")
	// -R udp: a datagram from inside the tunnel reaches the local echo
	// and its reply comes back.
	ru, err := far.ns.DialUDPAddrPort(netip.AddrPort{}, netip.MustParseAddrPort("10.0.0.2:9001"))
	if err != nil {
		t.Fatal(err)
	}
	defer ru.Close()
	if !udpEchoes(ru, "through -R udp") {
		t.Fatal("no echo through -R udp")
	}
	// SOCKS5 CONNECT by name.
	sc, err := net.Dial("tcp", locals[1].String())
	if err != nil {
		t.Fatal(err)
	}
	sc.SetDeadline(time.Now().Add(20 * time.Second))
	name := "echo.tunnel"
	req := append([]byte{5, 1, 0, 5, 1, 0, 3, byte(len(name))}, name...)
	sc.Write(append(req, 0, 7))
	var rep [12]byte
	if _, err := io.ReadFull(sc, rep[:]); err != nil || rep[3] != 0 {
		t.Fatalf("SOCKS5 CONNECT by name: % x %v", rep, err)
	}
	expectEcho(t, sc, "through SOCKS5")
	// A connection still open does not hold up the shutdown.
	open, err := net.Dial("tcp", locals[1].String())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	open.Write(append(req, 0, 7))
	io.ReadFull(open, rep[:])
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("userspace returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("userspace still running 10 s after cancel, with a SOCKS5 connection open")
	}
}

func acceptEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() { io.Copy(c, c); c.Close() }()
	}
}

func expectEcho(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	c.Write([]byte(msg))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("echo %q: %q %v", msg, got, err)
	}
}

func udpEchoes(u net.Conn, msg string) bool {
	b := make([]byte, 2048)
	for range 10 {
		u.Write([]byte(msg))
		u.SetReadDeadline(time.Now().Add(time.Second))
		if n, err := u.Read(b); err == nil && string(b[:n]) == msg {
			return true
		}
	}
	return false
}

// A second session with the default name serves the next free socket; an
// explicit --name is never replaced.
func TestListenUAPINextFreeName(t *testing.T) {
	n, err := newBenchNode(netip.MustParseAddr("10.0.0.1"), 1420)
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	dir := filepath.Join(t.TempDir(), "sock")
	o := userspaceOptions{name: "fipsgo0", socketDir: dir, logf: t.Logf}
	l1, err := listenUAPI(o, n.dev)
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	l2, err := listenUAPI(o, n.dev)
	if err != nil {
		t.Fatalf("second session: %v", err)
	}
	defer l2.Close()
	if _, err := os.Stat(filepath.Join(dir, "fipsgo1.sock")); err != nil {
		t.Fatalf("second socket: %v", err)
	}
	o.nameSet = true
	if l3, err := listenUAPI(o, n.dev); err == nil {
		l3.Close()
		t.Fatal("an explicit --name in use was replaced")
	}
}
