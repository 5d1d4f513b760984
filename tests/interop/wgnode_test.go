package interop

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/devicetest"

	wgconn "golang.zx2c4.com/wireguard/conn"
	wgdevice "golang.zx2c4.com/wireguard/device"
	wgnetstack "golang.zx2c4.com/wireguard/tun/netstack"
)

// wgNode is a wireguard-go device on wireguard-go's netstack TUN and its
// default UDP bind: the reference peer.
type wgNode struct {
	dev  *wgdevice.Device
	tnet *wgnetstack.Net
	key  noise.PrivateKey
	ip   netip.Addr
	port uint16
	seq  int
}

// newWGNode starts a wireguard-go node; cleanup closes it.
func newWGNode(t testing.TB, ip netip.Addr) *wgNode {
	t.Helper()
	tdev, tnet, err := wgnetstack.CreateNetTUN([]netip.Addr{ip}, nil, mtu)
	if err != nil {
		t.Fatal(err)
	}
	n := &wgNode{tnet: tnet, key: devicetest.Key(t), ip: ip}
	n.dev = wgdevice.NewDevice(tdev, wgconn.NewDefaultBind(), wgdevice.NewLogger(wgdevice.LogLevelSilent, ""))
	t.Cleanup(n.close)
	if err := n.dev.IpcSet(fmt.Sprintf("private_key=%s\nlisten_port=0\n", n.key.Hex())); err != nil {
		t.Fatal(err)
	}
	if err := n.dev.Up(); err != nil {
		t.Fatal(err)
	}
	p, err := strconv.ParseUint(n.get(t, "listen_port"), 10, 16)
	if err != nil || p == 0 {
		t.Fatalf("wireguard-go listen_port: %v, %v", p, err)
	}
	n.port = uint16(p)
	return n
}

// get is the first value of key in the device's UAPI get=1 answer.
func (n *wgNode) get(t testing.TB, key string) string {
	t.Helper()
	s, err := n.dev.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && k == key {
			return v
		}
	}
	return ""
}

func (n *wgNode) name() string               { return "wireguard-go" }
func (n *wgNode) addr() netip.Addr           { return n.ip }
func (n *wgNode) publicKey() noise.PublicKey { return n.key.PublicKey() }
func (n *wgNode) listenPort() uint16         { return n.port }
func (n *wgNode) close()                     { n.dev.Close() }

func (n *wgNode) addPeer(t testing.TB, other node, endpoint netip.AddrPort, psk noise.PresharedKey) {
	t.Helper()
	pub := other.publicKey()
	var b strings.Builder
	fmt.Fprintf(&b, "public_key=%s\n", hex.EncodeToString(pub[:]))
	if !psk.IsZero() {
		fmt.Fprintf(&b, "preshared_key=%s\n", psk.Hex())
	}
	if endpoint.IsValid() {
		fmt.Fprintf(&b, "endpoint=%s\n", endpoint)
	}
	fmt.Fprintf(&b, "allowed_ip=%s\n", hostPrefix(other.addr()))
	if err := n.dev.IpcSet(b.String()); err != nil {
		t.Fatal(err)
	}
}

func (n *wgNode) peerEndpoint(t testing.TB) netip.AddrPort {
	t.Helper()
	s := n.get(t, "endpoint")
	if s == "" {
		return netip.AddrPort{}
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatalf("wireguard-go endpoint %q: %v", s, err)
	}
	return ap
}

func (n *wgNode) dialTCP(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
	c, err := n.tnet.DialContextTCPAddrPort(ctx, to)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (n *wgNode) listenTCP(at netip.AddrPort) (net.Listener, error) {
	l, err := n.tnet.ListenTCPAddrPort(at)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (n *wgNode) dialUDP(to netip.AddrPort) (net.Conn, error) {
	c, err := n.tnet.DialUDPAddrPort(netip.AddrPortFrom(n.ip, 0), to)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (n *wgNode) listenUDP(at netip.AddrPort) (net.PacketConn, error) {
	c, err := n.tnet.ListenUDPAddrPort(at)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ping uses wireguard-go's netstack ping socket ("ping4"/"ping6"), a
// fresh one per attempt: its PingConn.ReadFrom registers for a
// notification before it reads, and gVisor notifies only when a socket's
// receive queue goes from empty to non-empty, so a reply that lands
// before ReadFrom starts waiting wedges that socket for good (every later
// reply queues behind it silently). Seen here in about one run in a
// thousand on a loaded machine; a new socket per attempt confines it to
// one attempt.
func (n *wgNode) ping(dst netip.Addr, attempts int) error {
	for range attempts {
		n.seq++
		ok, err := n.pingOnce(dst, n.seq)
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("no echo reply from %v after %d requests", dst, attempts)
}

// pingOnce sends echo request seq and reports whether its reply came back
// within pingWait.
func (n *wgNode) pingOnce(dst netip.Addr, seq int) (bool, error) {
	pc, err := n.tnet.DialPingAddr(n.ip, dst)
	if err != nil {
		return false, err
	}
	defer pc.Close()
	typ, proto := icmp.Type(ipv4.ICMPTypeEcho), protoICMP
	if dst.Is6() {
		typ, proto = ipv6.ICMPTypeEchoRequest, protoICMPv6
	}
	req, err := (&icmp.Message{Type: typ, Body: &icmp.Echo{Seq: seq, Data: pingData(seq)}}).Marshal(nil)
	if err != nil {
		return false, err
	}
	if _, err := pc.Write(req); err != nil {
		return false, err
	}
	buf := make([]byte, 1500)
	for deadline := time.Now().Add(pingWait); time.Now().Before(deadline); {
		pc.SetReadDeadline(deadline)
		k, from, err := pc.ReadFrom(buf)
		if err != nil {
			return false, nil
		}
		m, err := icmp.ParseMessage(proto, buf[:k])
		if err != nil {
			continue
		}
		e, isEcho := m.Body.(*icmp.Echo)
		isReply := m.Type == ipv4.ICMPTypeEchoReply || m.Type == ipv6.ICMPTypeEchoReply
		if isEcho && isReply && from.(*wgnetstack.PingAddr).Addr() == dst && e.Seq == seq && string(e.Data) == string(pingData(seq)) {
			return true, nil
		}
	}
	return false, nil
}
