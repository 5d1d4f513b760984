package tunnel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/fips-go/fips-go/tunnel"
)

// A server authorises each connection by the peer it comes from: WhoIs
// maps the remote address to the peer whose allowed IPs hold it, the only
// peer whose packets from that address the tunnel accepts.
func ExampleTunnel_WhoIs() {
	ctx := context.Background()
	serverKey, alice := tunnel.NewPrivateKey(), tunnel.NewPrivateKey()
	names := map[string]string{alice.PublicKey().Base64(): "alice"}

	server, err := tunnel.OpenBytes(ctx, []byte(`
[Interface]
PrivateKey = `+serverKey.Base64()+`
Address = 10.98.0.1/24

[Peer]
PublicKey = `+alice.PublicKey().Base64()+`
AllowedIPs = 10.98.0.2/32
`), tunnel.Options{})
	if err != nil {
		panic(err)
	}
	defer server.Close()
	ln, err := server.Listen("tcp", ":22")
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			from := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
			if p, ok := server.WhoIs(from); ok {
				fmt.Fprintf(c, "hello %s (%v)\n", names[p.PublicKey.Base64()], p.AllowedIPs)
			}
			c.Close()
		}
	}()

	client, err := tunnel.OpenBytes(ctx, []byte(fmt.Sprintf(`
[Interface]
PrivateKey = %s
Address = 10.98.0.2/24

[Peer]
PublicKey = %s
AllowedIPs = 10.98.0.0/24
Endpoint = 127.0.0.1:%d
`, alice.Base64(), serverKey.PublicKey().Base64(), server.Status().ListenPort)), tunnel.Options{})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	c, err := client.DialContext(ctx, "tcp", "10.98.0.1:22")
	if err != nil {
		panic(err)
	}
	defer c.Close()
	greeting, _ := io.ReadAll(c)
	fmt.Print(string(greeting))
	// Output: hello alice ([10.98.0.2/32])
}

// A dial to an address no peer's AllowedIPs hold fails at once, not when
// its deadline runs out, with an error that names the address.
func ExampleErrNoRoute() {
	t, err := tunnel.OpenBytes(context.Background(), []byte(`
[Interface]
PrivateKey = `+tunnel.NewPrivateKey().Base64()+`
Address = 10.97.0.2/24

[Peer]
PublicKey = `+tunnel.NewPrivateKey().PublicKey().Base64()+`
AllowedIPs = 10.97.0.0/24
Endpoint = 127.0.0.1:51820
`), tunnel.Options{})
	if err != nil {
		panic(err)
	}
	defer t.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = t.DialContext(ctx, "tcp", "192.0.2.1:443")
	fmt.Println(err)
	fmt.Println(errors.Is(err, tunnel.ErrNoRoute), ctx.Err())
	// Output:
	// dial tcp 192.0.2.1:443: tunnel: no peer routes this address (not in any peer's AllowedIPs)
	// true <nil>
}
