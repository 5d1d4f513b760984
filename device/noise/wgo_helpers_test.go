package noise

import (
	"bytes"
	"encoding/binary"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	wgconn "golang.zx2c4.com/wireguard/conn"
	wgdevice "golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"
)

// This file holds the scaffolding for running wireguard-go's device as the
// reference peer: an in-memory wireguard-go conn.Bind, a device factory and
// helpers to build packets and marshal wireguard-go's message structs.

// seeded returns the random stream cryptotest.SetGlobalRandom(t, seed)
// installs as crypto/rand: ChaCha8 keyed with the seed, little-endian, in
// the first eight bytes. Reading it in the order wireguard-go reads
// crypto/rand reproduces wireguard-go's ephemerals, indices and nonces.
func seeded(seed uint64) *mathrand.ChaCha8 {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:8], seed)
	return mathrand.NewChaCha8(s)
}

// wgEndpoint is a wireguard-go conn.Endpoint for one UDP address.
type wgEndpoint netip.AddrPort

func (e wgEndpoint) ClearSrc()           {}
func (e wgEndpoint) SrcToString() string { return "" }
func (e wgEndpoint) DstToString() string { return netip.AddrPort(e).String() }
func (e wgEndpoint) DstToBytes() []byte {
	b, _ := netip.AddrPort(e).MarshalBinary()
	return b
}
func (e wgEndpoint) DstIP() netip.Addr { return netip.AddrPort(e).Addr() }
func (e wgEndpoint) SrcIP() netip.Addr { return netip.Addr{} }

// wgBind is an in-memory wireguard-go conn.Bind: datagrams written to in
// arrive at the device from src; datagrams the device sends appear on out.
type wgBind struct {
	src netip.AddrPort
	in  chan []byte
	out chan []byte

	mu     sync.Mutex
	closed chan struct{} // nil while closed
}

var _ wgconn.Bind = (*wgBind)(nil)

func newWGBind(src netip.AddrPort) *wgBind {
	return &wgBind{src: src, in: make(chan []byte), out: make(chan []byte, 64)}
}

func (b *wgBind) Open(port uint16) ([]wgconn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed != nil {
		return nil, 0, wgconn.ErrBindAlreadyOpen
	}
	closed := make(chan struct{})
	b.closed = closed
	recv := func(packets [][]byte, sizes []int, eps []wgconn.Endpoint) (int, error) {
		select {
		case p := <-b.in:
			sizes[0] = copy(packets[0], p)
			eps[0] = wgEndpoint(b.src)
			return 1, nil
		case <-closed:
			return 0, net.ErrClosed
		}
	}
	return []wgconn.ReceiveFunc{recv}, 51820, nil
}

func (b *wgBind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed != nil {
		close(b.closed)
		b.closed = nil
	}
	return nil
}

func (b *wgBind) SetMark(uint32) error { return nil }
func (b *wgBind) BatchSize() int       { return 1 }

func (b *wgBind) Send(bufs [][]byte, _ wgconn.Endpoint) error {
	for _, p := range bufs {
		select {
		case b.out <- bytes.Clone(p):
		default: // a test that stopped reading: drop, like UDP
		}
	}
	return nil
}

func (b *wgBind) ParseEndpoint(s string) (wgconn.Endpoint, error) {
	ap, err := netip.ParseAddrPort(s)
	return wgEndpoint(ap), err
}

// wgPeer is a running wireguard-go device with one peer: us.
type wgPeer struct {
	dev  *wgdevice.Device
	bind *wgBind
	tun  *tuntest.ChannelTUN
}

// Addresses inside the tunnel: wireguard-go is 10.0.0.1, we are 10.0.0.2.
var (
	wgTunnelAddr  = netip.MustParseAddr("10.0.0.1")
	ourTunnelAddr = netip.MustParseAddr("10.0.0.2")
	ourUDPAddr    = netip.MustParseAddrPort("192.0.2.2:51821")
)

// newWGPeer starts a wireguard-go device with private key priv and one
// peer, remote, reachable at ourUDPAddr. Call close before the test returns.
func newWGPeer(t *testing.T, priv PrivateKey, remote PublicKey, psk PresharedKey) *wgPeer {
	t.Helper()
	tun := tuntest.NewChannelTUN()
	bind := newWGBind(ourUDPAddr)
	logger := &wgdevice.Logger{Verbosef: wgdevice.DiscardLogf, Errorf: wgdevice.DiscardLogf}
	dev := wgdevice.NewDevice(tun.TUN(), bind, logger)
	cfg := fmt.Sprintf("private_key=%s\npublic_key=%s\npreshared_key=%s\nendpoint=%s\nallowed_ip=%s/32\n",
		priv.Hex(), remote.Hex(), psk.Hex(), ourUDPAddr, ourTunnelAddr)
	if err := dev.IpcSet(cfg); err != nil {
		dev.Close()
		t.Fatalf("wireguard-go IpcSet: %v", err)
	}
	if err := dev.Up(); err != nil {
		dev.Close()
		t.Fatalf("wireguard-go Up: %v", err)
	}
	return &wgPeer{dev: dev, bind: bind, tun: tun}
}

func (w *wgPeer) close() { w.dev.Close() }

func (w *wgPeer) peer(t *testing.T, pub PublicKey) *wgdevice.Peer {
	t.Helper()
	p := w.dev.LookupPeer(wgdevice.NoisePublicKey(pub))
	if p == nil {
		t.Fatal("wireguard-go has no such peer")
	}
	return p
}

// recv returns the next datagram of type typ the device sends, skipping
// others (keepalives, retried initiations).
func (w *wgPeer) recv(t *testing.T, typ uint32) []byte {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case b := <-w.bind.out:
			if PeekType(b) == typ {
				return b
			}
		case <-timeout:
			t.Fatalf("wireguard-go sent no message of type %d", typ)
		}
	}
}

// deliver hands a datagram to the device as if it came from ourUDPAddr.
func (w *wgPeer) deliver(t *testing.T, b []byte) {
	t.Helper()
	select {
	case w.bind.in <- b:
	case <-time.After(10 * time.Second):
		t.Fatal("wireguard-go does not read its bind")
	}
}

// tunRead returns the next packet wireguard-go writes to its TUN.
func (w *wgPeer) tunRead(t *testing.T) []byte {
	t.Helper()
	select {
	case p := <-w.tun.Inbound:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("wireguard-go wrote no packet to its TUN")
		return nil
	}
}

// ipv4Packet builds an IPv4 packet carrying payload with a valid header
// (wireguard-go checks the version, the length and the source address).
func ipv4Packet(src, dst netip.Addr, payload string) []byte {
	p := make([]byte, 20+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8] = 64
	p[9] = 17
	s, d := src.As4(), dst.As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(p[10:], ^uint16(sum))
	copy(p[20:], payload)
	return p
}

// sealTransport builds a whole transport message carrying packet.
func sealTransport(t *testing.T, kp *Keypair, packet []byte) []byte {
	t.Helper()
	counter, ok := kp.NextCounter()
	if !ok {
		t.Fatal("keypair exhausted")
	}
	msg := make([]byte, TransportHeaderSize, TransportOverhead+len(packet))
	PutTransportHeader(msg, kp.RemoteIndex, counter)
	return kp.Seal(new(Nonce), msg, counter, packet)
}

// openTransport decrypts a whole transport message addressed to kp.
func openTransport(t *testing.T, kp *Keypair, msg []byte) []byte {
	t.Helper()
	receiver, counter, err := ParseTransportHeader(msg)
	if err != nil {
		t.Fatal(err)
	}
	if receiver != kp.LocalIndex {
		t.Fatalf("transport message for index %#x, keypair has %#x", receiver, kp.LocalIndex)
	}
	pt, err := kp.Open(new(Nonce), nil, counter, msg[TransportHeaderSize:])
	if err != nil {
		t.Fatalf("open transport message: %v", err)
	}
	return pt
}

// wgMarshal encodes a wireguard-go message struct (fixed-size fields only)
// in wire order.
func wgMarshal(t *testing.T, msg any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, msg); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testKey derives a deterministic private key from seed.
func testKey(t testing.TB, seed uint64) PrivateKey {
	t.Helper()
	k, err := GeneratePrivateKey(seeded(seed))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
