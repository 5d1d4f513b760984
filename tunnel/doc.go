// Package tunnel puts a WireGuard tunnel inside a Go program, without root:
// the program dials, listens and resolves names through the tunnel, which
// runs on a userspace TCP/IP stack and one UDP socket.
//
// # Opening
//
// Open a tunnel from a wg-quick(8) file (OpenFile), its text (OpenBytes),
// or a Config built in code or by Parse. Address gives the tunnel's own
// addresses, DNS the name servers inside it (and search domains for names
// without a dot), MTU the stack's MTU; the hooks and Table mean nothing
// without a TUN and are ignored. The zero Options work; set Logf or Logger
// to see what the device reports. Close ends every goroutine the tunnel
// started.
//
// # Using
//
// DialContext has the signature of net.Dialer.DialContext, so it plugs
// into anything that takes a dial function. HTTPClient returns an
// *http.Client built on it. Listen and ListenPacket accept connections
// and datagrams on the tunnel's addresses (with "tcp" or "udp" and
// ":port", of both families when it has both); LookupNetIP and
// LookupHost resolve names; Ping sends ICMP echo requests. WhoIs tells a
// server which peer a connection's remote address belongs to, so that it
// can authorise by peer. Options.Capture records the inner packets as a
// pcap file.
//
// A tunnel's names come from its configuration only: Options.Hosts first,
// then the DNS servers in order, asked through the tunnel, with the
// search domains for names without a dot (ErrNoDNS when a name is not in
// Hosts and there is no server). The host's /etc/hosts, resolv.conf and
// search domains play no part, so "localhost" means what the tunnel's
// DNS says, not this machine.
//
// The tunnel says what it cannot do, at once: a dial, ping or datagram to
// an address no peer's AllowedIPs hold fails with ErrNoRoute (in a
// *net.OpError naming the address) instead of waiting out its deadline;
// Listen refuses an address the tunnel does not own; and once the tunnel
// is closed, its operations fail with errors matching net.ErrClosed.
//
// WireGuard starts a handshake only when there is something to send;
// WaitHandshake starts one and waits for it, so a program can tell "the
// peer answers" from "a dial is slow". Options.OnEvent hears of every
// completed handshake, expired session and changed endpoint as it
// happens, without polling (a slow OnEvent loses the oldest events, never
// holds up the tunnel). Status reports each peer's endpoint, last
// handshake and traffic.
//
// Endpoints given as host names are resolved at start and, when
// handshakes to them fail, again, as the daemon does (Options.NoFollow
// turns that off).
//
// # Keys
//
// NewPrivateKey makes a key; its PublicKey method gives the key peers
// name it by, and Base64 the form a config file takes, so a program can
// write a config without wg(8):
//
//	priv := tunnel.NewPrivateKey()
//	conf := "[Interface]\nPrivateKey = " + priv.Base64() + "\n..."
//	fmt.Println("my public key:", priv.PublicKey())
//
// The key types are package device/noise's.
//
// # What it costs
//
// An open tunnel runs a fixed set of goroutines plus one crypto worker per
// CPU (Options.Device.Workers); its pools are bounded and allocated on
// first use. A TCP connection this side closed first keeps its memory and
// port through TIME-WAIT (Options.Netstack.TCPTimeWait, 5 s by default
// instead of gVisor's 60 s). docs/architecture.md gives the measured
// figures and the ceiling.
//
// # What it does not do
//
// A tunnel accepts connections on its own addresses only. The rootless
// exit takes connections to any address with a promiscuous stack and a
// forwarder (package tun/netstack's SetForwarder), but a tunnel that did
// so would be a router, with a router's questions (which destinations,
// how many flows a peer may hold): a program that wants that runs
// `fips-go userspace --exit`, or builds it on packages device and
// tun/netstack.
//
// # A complete program
//
// GET a page by name through a tunnel:
//
//	package main
//
//	import (
//		"context"
//		"io"
//		"os"
//
//		"github.com/fips-go/fips-go/tunnel"
//	)
//
//	func main() {
//		ctx := context.Background()
//		t, err := tunnel.OpenFile(ctx, "wg0.conf", tunnel.Options{})
//		if err != nil {
//			panic(err)
//		}
//		defer t.Close()
//		if err := t.WaitHandshake(ctx); err != nil {
//			panic(err)
//		}
//		resp, err := t.HTTPClient().Get("http://web.internal/")
//		if err != nil {
//			panic(err)
//		}
//		defer resp.Body.Close()
//		io.Copy(os.Stdout, resp.Body)
//	}
//
// # Programs that own a TUN
//
// A program that has a TUN device (and the privileges it takes) uses
// package device instead: device.New with a tun.Device and a conn.Bind,
// configured with its Apply method. This package is that plus a userspace
// TCP/IP stack in place of the TUN.
//
// # What is public
//
// The supported API of module github.com/fips-go/fips-go is this package,
// device, device/noise (keys), device/timers (the protocol's constants),
// ipc (the UAPI protocol and the wg-quick file format: Config is its
// QuickConfig), conn, conn/membind (an in-memory network for tests), tun,
// tun/memtun and tun/netstack. It follows semantic import versioning from the first tag.
// Everything else is under internal/ and cannot be imported.
package tunnel
