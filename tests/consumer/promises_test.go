package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/tunnel"
)

// What the library promises a program outside the module, with public
// names only: a server tells which peer a connection comes from (WhoIs),
// a client names the server through Options.Hosts without any DNS
// server, and an address no peer routes fails at once with ErrNoRoute.
func TestWhoIsHostsAndNoRoute(t *testing.T) {
	serverKey, clientKey := tunnel.NewPrivateKey(), tunnel.NewPrivateKey()
	server, err := tunnel.OpenBytes(context.Background(), fmt.Appendf(nil, `
[Interface]
PrivateKey = %s
Address = 10.89.0.1/24

[Peer]
PublicKey = %s
AllowedIPs = 10.89.0.2/32
`, serverKey.Base64(), clientKey.PublicKey().Base64()), tunnel.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	ln, err := server.Listen("tcp", ":7000")
	if err != nil {
		t.Fatal(err)
	}
	// The server greets each connection with the key of its peer.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			from := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
			if p, ok := server.WhoIs(from); ok {
				io.WriteString(c, p.PublicKey.Base64())
			}
			c.Close()
		}
	}()

	client, err := tunnel.OpenBytes(context.Background(), fmt.Appendf(nil, `
[Interface]
PrivateKey = %s
Address = 10.89.0.2/24

[Peer]
PublicKey = %s
AllowedIPs = 10.89.0.0/24
Endpoint = 127.0.0.1:%d
`, clientKey.Base64(), serverKey.PublicKey().Base64(), server.Status().ListenPort),
		tunnel.Options{Logf: t.Logf, Hosts: map[string][]netip.Addr{"server.tunnel": {netip.MustParseAddr("10.89.0.1")}}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, "tcp", "server.tunnel:7000")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := clientKey.PublicKey().Base64(); string(got) != want {
		t.Fatalf("the server saw peer %q, want the client's key %q", got, want)
	}

	// 192.0.2.1 is in no peer's AllowedIPs: the dial fails before ctx
	// ends, with an error naming the address.
	_, err = client.DialContext(ctx, "tcp", "192.0.2.1:443")
	var op *net.OpError
	if !errors.Is(err, tunnel.ErrNoRoute) || !errors.As(err, &op) || ctx.Err() != nil {
		t.Fatalf("dial to an unrouted address: %v (ctx: %v), want a *net.OpError matching ErrNoRoute", err, ctx.Err())
	}
}
