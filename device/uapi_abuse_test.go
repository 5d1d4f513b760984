package device_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/tun/memtun"
)

// abuseSafety bounds every wait that must end; a passing run stays far below.
const abuseSafety = 20 * time.Second

// tunnelPair is two real devices joined over the in-memory network, each
// the other's only peer: A is 10.0.0.1, B is 10.0.0.2.
type tunnelPair struct {
	a, b   *device.Device
	ta, tb *memtun.Device
}

func newTunnelPair(t *testing.T) *tunnelPair {
	t.Helper()
	netw := membind.NewNetwork(membind.NetOptions{})
	p := &tunnelPair{ta: memtun.New("a", 1420, 256), tb: memtun.New("b", 1420, 256)}
	addrA, addrB := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	var err error
	// A cap below the abuse test's 100,000-peer request: the request
	// must be refused whole.
	optsA := device.Options{ListenPort: 51820}
	device.SetLimits(&optsA, 1<<16, 0)
	if p.a, err = device.New(p.ta, netw.NewBind(addrA), optsA); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.a.Close() })
	if p.b, err = device.New(p.tb, netw.NewBind(addrB), device.Options{ListenPort: 51820}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.b.Close() })
	ka, _ := noise.GeneratePrivateKey(rand.Reader)
	kb, _ := noise.GeneratePrivateKey(rand.Reader)
	cfg := func(priv noise.PrivateKey, peer noise.PublicKey, ep netip.Addr, aip string) *device.Config {
		e := netip.AddrPortFrom(ep, 51820)
		return &device.Config{PrivateKey: &priv, Peers: []device.PeerConfig{{
			PublicKey: peer, Endpoint: &e,
			AllowedIPs: []device.AllowedIPChange{{Prefix: netip.MustParsePrefix(aip)}},
		}}}
	}
	if err := p.a.Apply(cfg(ka, kb.PublicKey(), addrB, "10.0.0.2/32")); err != nil {
		t.Fatal(err)
	}
	if err := p.b.Apply(cfg(kb, ka.PublicKey(), addrA, "10.0.0.1/32")); err != nil {
		t.Fatal(err)
	}
	return p
}

// roundTrip sends one datagram from A to B through the tunnel and waits
// for it; false if it did not arrive whole within abuseSafety.
func (p *tunnelPair) roundTrip(seq uint32) error {
	payload := binary.BigEndian.AppendUint32(make([]byte, 0, 64), seq)
	payload = append(payload, bytes.Repeat([]byte{byte(seq)}, 60)...)
	pkt := memtun.BuildUDPv4(netip.MustParseAddrPort("10.0.0.1:4000"), netip.MustParseAddrPort("10.0.0.2:5000"), payload)
	ctx, cancel := context.WithTimeout(context.Background(), abuseSafety)
	defer cancel()
	if err := p.ta.InjectContext(ctx, pkt); err != nil {
		return err
	}
	got, err := p.tb.Next(ctx)
	if err != nil {
		return fmt.Errorf("packet %d not delivered: %w", seq, err)
	}
	if !bytes.Equal(got, pkt) {
		return fmt.Errorf("packet %d corrupted", seq)
	}
	return nil
}

// hugeSet is a set request adding n peers with one allowed IP each.
func hugeSet(n int) []byte {
	var b bytes.Buffer
	b.WriteString("set=1\n")
	var k [32]byte
	for i := range n {
		binary.BigEndian.PutUint32(k[:], uint32(i))
		k[31] = 0x99
		fmt.Fprintf(&b, "public_key=%x\nallowed_ip=10.%d.%d.%d/32\n", k, 100+i>>16&63, i>>8&255, i&255)
	}
	b.WriteString("\n")
	return b.Bytes()
}

// request sends req on a new connection and returns the errno line of the
// reply, reading while it writes so that a server that refuses early can
// say so.
func request(path string, req []byte) (string, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(abuseSafety))
	go c.Write(req)
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// TestUAPIAbuseLeavesOthersAndDataPathWorking attacks a real device's UAPI
// socket all at once: clients that stop halfway through a request and hold
// their connection, clients that never read their replies, clients that
// send a valid request one byte at a time, a request of 100,000 peers
// (past the peer cap), a request of 40 MiB (past the size cap), and
// clients that keep asking get=1. Meanwhile traffic crosses the tunnel.
// Every honest client is answered, the two oversized requests get an error
// and change nothing, the data path keeps delivering every packet, and
// the heap stays within a bound set by the request-size cap.
func TestUAPIAbuseLeavesOthersAndDataPathWorking(t *testing.T) {
	if testing.Short() {
		t.Skip("sends ~60 MB through the UAPI socket")
	}
	p := newTunnelPair(t)
	if err := p.roundTrip(0); err != nil { // the handshake, before the abuse
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "abuse")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := ipc.Listen(dir, "wg0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- l.Serve(p.a, ipc.ServeOptions{Timeout: 10 * time.Second}) }()
	t.Cleanup(func() { l.Close(); <-served })

	huge := hugeSet(100_000)
	oversized := append([]byte("set=1\n"), bytes.Repeat([]byte("allowed_ip=10.0.0.0/8\n"), (40<<20)/22)...)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, 256)
	// Stuck clients: half a request, then silence, held open.
	for range 24 {
		c, err := net.Dial("unix", l.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "set=1\npublic_key=")
	}
	// Clients that never read: the server's writes must time out.
	for range 4 {
		c, err := net.Dial("unix", l.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go c.Write(bytes.Repeat([]byte("get=1\n\n"), 20000))
	}
	// Slow clients: a valid request, one byte every 2 ms.
	slowKeys := make([][32]byte, 6)
	for i := range slowKeys {
		slowKeys[i][0], slowKeys[i][31] = byte(i), 0x55
		req := fmt.Sprintf("set=1\npublic_key=%x\nallowed_ip=10.7.%d.0/24\n\n", slowKeys[i], i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", l.Path())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(abuseSafety))
			for j := range len(req) {
				c.Write([]byte{req[j]})
				time.Sleep(2 * time.Millisecond)
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			if line != "errno=0\n" {
				errs <- fmt.Errorf("slow client %d: %q, %v", i, line, err)
			}
		}()
	}
	for _, big := range []struct {
		name string
		req  []byte
		want int64
	}{{"100,000 peers", huge, ipc.ErrnoInvalid}, {"40 MiB", oversized, ipc.ErrnoTooBig}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line, err := request(l.Path(), big.req)
			if line != fmt.Sprintf("errno=%d", big.want) {
				errs <- fmt.Errorf("%s: reply %q, %v; want errno=%d", big.name, line, err, big.want)
			}
		}()
	}
	// Honest readers.
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := ipc.Dial(dir, "wg0")
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for r := range 10 {
				if _, err := c.Get(); err != nil {
					errs <- fmt.Errorf("reader %d, get %d: %w", i, r, err)
					return
				}
			}
		}()
	}
	// The data path, for as long as the abuse lasts.
	abuseDone := make(chan struct{})
	dataDone := make(chan int)
	go func() {
		n := 0
		for seq := uint32(1); ; seq++ {
			select {
			case <-abuseDone:
				dataDone <- n
				return
			default:
			}
			if err := p.roundTrip(seq); err != nil {
				errs <- err
				dataDone <- n
				return
			}
			n++
		}
	}()
	wg.Wait()
	close(abuseDone)
	delivered := <-dataDone
	close(stopSampling)
	<-sampled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if delivered == 0 {
		t.Error("no packet crossed the tunnel during the abuse")
	}
	growth := int64(peak.Load()) - int64(base)
	t.Logf("%d packets crossed the tunnel during the abuse; heap grew by at most %d MiB", delivered, growth>>20)
	// Two requests parsed at once, each bounded by the 16 MiB request cap,
	// what the parsed Configs cost on top, and garbage not yet collected
	// (measured: 86 MiB). Before the peer cap, applying the 100,000 peers
	// alone added 154 MiB, and every further request would add more.
	if limit := int64(8 * ipc.DefaultMaxRequest); growth > limit {
		t.Errorf("heap grew by %d MiB during the abuse, more than %d MiB", growth>>20, limit>>20)
	}
	st := p.a.Status()
	if len(st.Peers) != 1+len(slowKeys) {
		t.Errorf("%d peers after the abuse, want 1 + %d slow clients' (the refused requests must change nothing)", len(st.Peers), len(slowKeys))
	}
	c, err := ipc.Dial(dir, "wg0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Get(); err != nil {
		t.Fatalf("a client after the abuse: %v", err)
	}
}
