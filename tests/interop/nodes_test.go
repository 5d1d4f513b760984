package interop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/devicetest"
	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/netstack"
)

// mtu is the tunnel MTU of every node, as in `fips-go bench`.
const mtu = 1420

// Ping retries: each attempt waits pingWait for its reply. The first
// attempt also carries the handshake, which both implementations finish in
// well under a second on loopback; the retries only absorb scheduling noise
// on a busy machine.
const (
	pingAttempts = 20
	pingWait     = 500 * time.Millisecond
)

// node is one WireGuard device with a userspace TCP/IP stack behind it:
// fips-go's or wireguard-go's.
type node interface {
	name() string
	addr() netip.Addr // the stack's inner address
	publicKey() noise.PublicKey
	listenPort() uint16
	// addPeer configures other as the only peer, reaching other.addr();
	// a zero endpoint leaves the endpoint for the handshake to teach, a
	// zero psk means none.
	addPeer(t testing.TB, other node, endpoint netip.AddrPort, psk noise.PresharedKey)
	// peerEndpoint is the endpoint the device holds for its peer now.
	peerEndpoint(t testing.TB) netip.AddrPort
	dialTCP(ctx context.Context, to netip.AddrPort) (net.Conn, error)
	listenTCP(at netip.AddrPort) (net.Listener, error)
	dialUDP(to netip.AddrPort) (net.Conn, error)
	listenUDP(at netip.AddrPort) (net.PacketConn, error)
	// ping sends ICMP echo requests to dst through the tunnel until a
	// matching reply comes back, or fails after pingAttempts.
	ping(dst netip.Addr, attempts int) error
	close()
}

func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// pingData is the payload of echo request seq, distinct per seq so a
// reply cannot match the wrong request.
func pingData(seq int) []byte {
	return fmt.Appendf(nil, "fips-go interop ping %05d ........................", seq)
}

// fipsNode is a fips-go device on our netstack and our Linux UDP bind.
type fipsNode struct {
	ns   *netstack.Net
	inj  *injectTUN // nil unless built for pinging
	dev  *device.Device
	key  noise.PrivateKey
	ip   netip.Addr
	port uint16
	seq  int // last ping sequence number used
}

// newFipsNode starts a fips-go node; withPing puts an injectTUN between
// the device and the stack so the node can originate pings (a benchmark
// node has none, like `fips-go bench`). Cleanup closes the node.
func newFipsNode(t testing.TB, ip netip.Addr, withPing bool) *fipsNode {
	t.Helper()
	ns, err := netstack.New(netstack.Options{Addresses: []netip.Addr{ip}, MTU: mtu})
	if err != nil {
		t.Fatal(err)
	}
	n := &fipsNode{ns: ns, key: devicetest.Key(t), ip: ip}
	var td tun.Device = ns
	if withPing {
		n.inj = newInjectTUN(ns)
		td = n.inj
	}
	n.dev, err = device.New(td, conn.NewDefault(conn.Options{}), device.Options{})
	if err != nil {
		td.Close()
		t.Fatal(err)
	}
	t.Cleanup(n.close)
	if err := n.dev.Apply(&device.Config{PrivateKey: &n.key}); err != nil {
		t.Fatal(err)
	}
	n.port = n.dev.Status().ListenPort
	if n.port == 0 {
		t.Fatal("fips-go device reports listen port 0")
	}
	return n
}

func (n *fipsNode) name() string               { return "fips-go" }
func (n *fipsNode) addr() netip.Addr           { return n.ip }
func (n *fipsNode) publicKey() noise.PublicKey { return n.key.PublicKey() }
func (n *fipsNode) listenPort() uint16         { return n.port }
func (n *fipsNode) close()                     { n.dev.Close() }

func (n *fipsNode) addPeer(t testing.TB, other node, endpoint netip.AddrPort, psk noise.PresharedKey) {
	t.Helper()
	pc := device.PeerConfig{
		PublicKey:  other.publicKey(),
		AllowedIPs: []device.AllowedIPChange{{Prefix: hostPrefix(other.addr())}},
	}
	if endpoint.IsValid() {
		pc.Endpoint = &endpoint
	}
	if !psk.IsZero() {
		pc.PresharedKey = &psk
	}
	if err := n.dev.Apply(&device.Config{Peers: []device.PeerConfig{pc}}); err != nil {
		t.Fatal(err)
	}
}

func (n *fipsNode) peerEndpoint(t testing.TB) netip.AddrPort {
	t.Helper()
	st := n.dev.Status()
	if len(st.Peers) != 1 {
		t.Fatalf("fips-go has %d peers, want 1", len(st.Peers))
	}
	return st.Peers[0].Endpoint
}

// counter is the value of one of the device's named counters.
func (n *fipsNode) counter(t testing.TB, name string) uint64 {
	t.Helper()
	for _, c := range n.dev.Status().Counters {
		if c.Name == name {
			return c.Value
		}
	}
	t.Fatalf("fips-go has no counter %q", name)
	return 0
}

func (n *fipsNode) dialTCP(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
	return n.ns.DialTCPAddrPort(ctx, to)
}

func (n *fipsNode) listenTCP(at netip.AddrPort) (net.Listener, error) {
	return n.ns.ListenTCPAddrPort(at)
}

func (n *fipsNode) dialUDP(to netip.AddrPort) (net.Conn, error) {
	return n.ns.DialUDPAddrPort(netip.AddrPortFrom(n.ip, 0), to)
}

func (n *fipsNode) listenUDP(at netip.AddrPort) (net.PacketConn, error) {
	return n.ns.ListenUDPAddrPort(at)
}

// ping injects raw echo requests at the TUN and waits for the replies the
// injectTUN diverts.
func (n *fipsNode) ping(dst netip.Addr, attempts int) error {
	if n.inj == nil {
		return errors.New("fips-go node built without ping support")
	}
	sent := make(map[int]bool)
	for range attempts {
		n.seq++
		sent[n.seq] = true
		req := echoRequest(n.ip, dst, pingIdent, n.seq, pingData(n.seq))
		timer := time.NewTimer(pingWait)
		select {
		case n.inj.inject <- req:
		case <-timer.C:
			return errors.New("fips-go device did not read the injected echo request")
		}
	wait:
		for {
			select {
			case p := <-n.inj.replies:
				r, _ := parseEchoReply(p)
				if r.src == dst && r.dst == n.ip && sent[r.echo.Seq] && string(r.echo.Data) == string(pingData(r.echo.Seq)) {
					timer.Stop()
					return nil
				}
			case <-timer.C:
				break wait
			}
		}
	}
	return fmt.Errorf("no echo reply from %v after %d requests", dst, attempts)
}
