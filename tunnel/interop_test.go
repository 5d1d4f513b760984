package tunnel_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/tunnel"
)

// This package's tunnel against wireguard-go's device on its netstack,
// each way, TCP and UDP, byte for byte.
func TestInteropWireguardGo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Run("fips-go dials wireguard-go", func(t *testing.T) {
		sk, ck := newKey(), newKey()
		wg, port := wgNode(t, serverAddr, sk.private, fmt.Sprintf("public_key=%s\nallowed_ip=%v/32\n", hexKey(t, ck.public), clientAddr))
		ln, err := wg.ListenTCPAddrPort(netip.AddrPortFrom(serverAddr, 7))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go echoTCP(ln)
		pc, err := wg.ListenUDPAddrPort(netip.AddrPortFrom(serverAddr, 7))
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		go echoUDP(pc)
		client := open(t, clientConf(ck, sk, "", fmt.Sprint("127.0.0.1:", port)), tunnel.Options{Logf: t.Logf})
		if err := client.WaitHandshake(ctx); err != nil {
			t.Fatal(err)
		}
		dial := func(network string) (net.Conn, error) {
			return client.DialContext(ctx, network, netip.AddrPortFrom(serverAddr, 7).String())
		}
		checkEcho(t, dial)
	})
	t.Run("wireguard-go dials fips-go", func(t *testing.T) {
		sk, ck := newKey(), newKey()
		server := open(t, serverConf(sk, ck), tunnel.Options{Logf: t.Logf})
		ln, err := server.Listen("tcp", ":7")
		if err != nil {
			t.Fatal(err)
		}
		go echoTCP(ln)
		pc, err := server.ListenPacket("udp", ":7")
		if err != nil {
			t.Fatal(err)
		}
		go echoUDP(pc)
		wg, _ := wgNode(t, clientAddr, ck.private, fmt.Sprintf("public_key=%s\nallowed_ip=10.77.0.0/24\nendpoint=127.0.0.1:%d\n",
			hexKey(t, sk.public), server.Status().ListenPort))
		dial := func(network string) (net.Conn, error) {
			if network == "udp" {
				return wg.DialUDPAddrPort(netip.AddrPort{}, netip.AddrPortFrom(serverAddr, 7))
			}
			return wg.DialContextTCPAddrPort(ctx, netip.AddrPortFrom(serverAddr, 7))
		}
		checkEcho(t, dial)
	})
}

func echoTCP(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			io.Copy(c, c)
			c.Close()
		}()
	}
}

func echoUDP(pc net.PacketConn) {
	buf := make([]byte, 65536)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		pc.WriteTo(buf[:n], from)
	}
}

// checkEcho sends 4 MiB through a TCP echo and datagrams of several sizes
// through a UDP one, and wants every byte back as sent.
func checkEcho(t *testing.T, dial func(network string) (net.Conn, error)) {
	t.Helper()
	c, err := dial("tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	msg := make([]byte, 4<<20)
	rand.Read(msg)
	go c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("tcp echo: %v (equal %v)", err, bytes.Equal(got, msg))
	}
	u, err := dial("udp")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	buf := make([]byte, 2048)
	for _, size := range []int{1, 100, 1200} {
		want := msg[:size]
		// A datagram may be lost before the path is warm; try a few times.
		ok := false
		for try := 0; try < 5 && !ok; try++ {
			u.Write(want)
			u.SetReadDeadline(time.Now().Add(time.Second))
			n, err := u.Read(buf)
			ok = err == nil && bytes.Equal(buf[:n], want)
		}
		if !ok {
			t.Fatalf("udp echo of %d bytes failed", size)
		}
	}
}
