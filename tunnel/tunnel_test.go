package tunnel_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tunnel"
)

var (
	serverAddr = netip.MustParseAddr("10.77.0.1")
	clientAddr = netip.MustParseAddr("10.77.0.2")
)

// pair opens a server tunnel serving the name web.test at its address
// and HTTP on port 80, and a client tunnel peered with it over loopback,
// whose DNS is the server unless noDNS. Both close at the test's end.
func pair(t testing.TB, noDNS bool) (server, client *tunnel.Tunnel) {
	t.Helper()
	sk, ck := newKey(), newKey()
	server = open(t, serverConf(sk, ck), tunnel.Options{Logf: t.Logf})
	go serveName(server, "web.test.", serverAddr)
	ln, err := server.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.Host)
	}))
	dns := fmt.Sprintf("DNS = %v, test\n", serverAddr)
	if noDNS {
		dns = ""
	}
	client = open(t, clientConf(ck, sk, dns, fmt.Sprint("127.0.0.1:", server.Status().ListenPort)), tunnel.Options{Logf: t.Logf})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := client.WaitHandshake(ctx); err != nil {
		t.Fatal("client:", err)
	}
	if err := server.WaitHandshake(ctx); err != nil {
		t.Fatal("server:", err)
	}
	return server, client
}

// serverConf is a tunnel at serverAddr whose one peer, ck, is at
// clientAddr and has no endpoint.
func serverConf(sk, ck keyPair) []byte {
	return fmt.Appendf(nil, "[Interface]\nPrivateKey = %s\nAddress = %v/24\n[Peer]\nPublicKey = %s\nAllowedIPs = %v/32\n",
		sk.private, serverAddr, ck.public, clientAddr)
}

// clientConf is a tunnel at clientAddr, with the lines iface added to
// [Interface], whose one peer, sk at endpoint, routes serverAddr's /24.
func clientConf(ck, sk keyPair, iface, endpoint string) []byte {
	return fmt.Appendf(nil, "[Interface]\nPrivateKey = %s\nAddress = %v/24\n%s[Peer]\nPublicKey = %s\nAllowedIPs = 10.77.0.0/24\nEndpoint = %s\n",
		ck.private, clientAddr, iface, sk.public, endpoint)
}

// open opens a tunnel from conf that closes at the test's end.
func open(t testing.TB, conf []byte, o tunnel.Options) *tunnel.Tunnel {
	t.Helper()
	tn, err := tunnel.OpenBytes(context.Background(), conf, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tn.Close() })
	return tn
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The whole path by name, and after Close (twice) no goroutine of either
// tunnel, its servers or the HTTP client is left.
func TestHTTPByNameLeavesNoGoroutine(t *testing.T) {
	leakcheck.Check(t)
	server, client := pair(t, false)
	hc := client.HTTPClient()
	for range 3 {
		if got := get(t, hc, "http://web.test/"); got != "hello web.test" {
			t.Fatalf("got %q", got)
		}
	}
	if got := get(t, hc, "http://web/"); got != "hello web" {
		t.Fatalf("by the search domain: got %q", got)
	}
	got, err := client.LookupHost(context.Background(), "web.test")
	if err != nil || len(got) != 1 || got[0] != serverAddr.String() {
		t.Fatalf("LookupHost: %v, %v", got, err)
	}
	if st := client.Status(); len(st.Peers) != 1 || st.Peers[0].LastHandshake.IsZero() || st.Peers[0].RxBytes == 0 {
		t.Fatalf("status %+v", st.Peers)
	}
	for _, tn := range []*tunnel.Tunnel{client, server} {
		if err := tn.Close(); err != nil {
			t.Fatal(err)
		}
		if err := tn.Close(); err != nil {
			t.Fatal("second Close:", err)
		}
		select {
		case <-tn.Done():
		default:
			t.Fatal("Done not closed after Close")
		}
	}
	if _, err := client.DialContext(context.Background(), "tcp", serverAddr.String()+":80"); err == nil {
		t.Fatal("dialled through a closed tunnel")
	}
}

// UDP by name, byte for byte, to an echo server inside the other tunnel.
func TestUDPByName(t *testing.T) {
	server, client := pair(t, false)
	pc, err := server.ListenPacket("udp4", ":7")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go echoUDP(pc)
	c, err := client.DialContext(context.Background(), "udp", "web.test:7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := bytes.Repeat([]byte("fips"), 300)
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 2048)
	n, err := c.Read(got)
	if err != nil || !bytes.Equal(got[:n], msg) {
		t.Fatalf("echo: %d bytes, %v", n, err)
	}
}

// Without DNS in the configuration a name is refused with ErrNoDNS, and
// addresses still work.
func TestNoDNS(t *testing.T) {
	_, client := pair(t, true)
	ctx := context.Background()
	if _, err := client.DialContext(ctx, "tcp", "web.test:80"); !errors.Is(err, tunnel.ErrNoDNS) {
		t.Fatalf("dial by name without DNS: %v, want ErrNoDNS", err)
	}
	if _, err := client.LookupNetIP(ctx, "ip", "web.test"); !errors.Is(err, tunnel.ErrNoDNS) {
		t.Fatalf("lookup without DNS: %v, want ErrNoDNS", err)
	}
	if got := get(t, client.HTTPClient(), "http://"+serverAddr.String()+"/"); got != "hello "+serverAddr.String() {
		t.Fatalf("got %q", got)
	}
	if rtt, err := client.Ping(ctx, serverAddr); err != nil || rtt <= 0 {
		t.Fatalf("ping: %v, %v", rtt, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	k := newKey()
	if _, err := tunnel.OpenBytes(ctx, []byte("[Interface]\nPrivateKey = "+k.private+"\n"), tunnel.Options{}); !errors.Is(err, tunnel.ErrNoAddress) {
		t.Fatalf("no Address: %v, want ErrNoAddress", err)
	}
	if _, err := tunnel.OpenBytes(ctx, []byte("[Interface]\nPrivateKey = nope\nAddress = 10.0.0.1/24\n"), tunnel.Options{}); err == nil {
		t.Fatal("a bad key was accepted")
	}
	if _, err := tunnel.Open(ctx, nil, tunnel.Options{}); err == nil {
		t.Fatal("a nil config was accepted")
	}
	tn, err := tunnel.OpenBytes(ctx, []byte("[Interface]\nPrivateKey = "+k.private+"\nAddress = 10.0.0.1/24\n"), tunnel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	if err := tn.WaitHandshake(ctx); !errors.Is(err, tunnel.ErrNoPeers) {
		t.Fatalf("WaitHandshake without peers: %v, want ErrNoPeers", err)
	}
	for _, bad := range [][2]string{{"tcp", "web.test:80"}, {"tcp4", "[fd00::1]:80"}, {"udp", ":80"}, {"tcp", "10.0.0.1:x"}} {
		if ln, err := tn.Listen(bad[0], bad[1]); err == nil {
			ln.Close()
			t.Errorf("Listen(%q, %q) was accepted", bad[0], bad[1])
		}
	}
}

// An endpoint given as a host name is resolved with ResolveEndpoint, the
// tunnel follows it, and Close ends the follower too.
func TestEndpointByName(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	sk, ck := newKey(), newKey()
	server := open(t, serverConf(sk, ck), tunnel.Options{})
	var mu sync.Mutex // guards asked: the follower may resolve too
	var asked []string
	client := open(t, clientConf(ck, sk, "", fmt.Sprint("server.invalid:", server.Status().ListenPort)), tunnel.Options{
		ResolveEndpoint: func(_ context.Context, host string) ([]netip.Addr, error) {
			mu.Lock()
			asked = append(asked, host)
			mu.Unlock()
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
	})
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := client.WaitHandshake(wctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 0 || asked[0] != "server.invalid" {
		t.Fatalf("resolver asked for %q", asked)
	}
}

// OpenFile reads the file itself, and its parse errors name the file.
func TestOpenFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "wg0.conf"), filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(good, serverConf(newKey(), newKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("[Interface]\nPrivateKey = nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tn, err := tunnel.OpenFile(ctx, good, tunnel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	if got := tn.Addresses(); len(got) != 1 || got[0] != serverAddr {
		t.Fatalf("addresses %v, want [%v]", got, serverAddr)
	}
	if _, err := tunnel.OpenFile(ctx, bad, tunnel.Options{}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("bad file: %v, want an error naming %s", err, bad)
	}
}

// OnEvent hears, in order, of each side's peer endpoint and handshake; it
// is not called after Close, which leaves no goroutine behind.
func TestOnEvent(t *testing.T) {
	leakcheck.Check(t)
	sk, ck := newKey(), newKey()
	var closed atomic.Bool
	var late atomic.Int32
	recorder := func(ch chan tunnel.Event) func(tunnel.Event) {
		return func(e tunnel.Event) {
			if closed.Load() {
				late.Add(1)
			}
			select {
			case ch <- e:
			default: // more handshakes than the test reads
			}
		}
	}
	serverEvents, clientEvents := make(chan tunnel.Event, 64), make(chan tunnel.Event, 64)
	server := open(t, serverConf(sk, ck), tunnel.Options{Logf: t.Logf, OnEvent: recorder(serverEvents)})
	endpoint := fmt.Sprint("127.0.0.1:", server.Status().ListenPort)
	client := open(t, clientConf(ck, sk, "", endpoint), tunnel.Options{Logf: t.Logf, OnEvent: recorder(clientEvents)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := client.WaitHandshake(ctx); err != nil {
		t.Fatal(err)
	}
	expect := func(side string, ch chan tunnel.Event, peer string, kinds ...device.PeerEventKind) {
		t.Helper()
		for _, k := range kinds {
			select {
			case e := <-ch:
				if e.Kind != k || e.Peer.String() != peer || e.Dropped != 0 {
					t.Fatalf("%s: event %v for %v (%d dropped), want %v for %v", side, e.Kind, e.Peer, e.Dropped, k, peer)
				}
				if k == device.EndpointChanged && side == "client" && e.Endpoint.String() != endpoint {
					t.Fatalf("client: endpoint event says %v, want %v", e.Endpoint, endpoint)
				}
			case <-ctx.Done():
				t.Fatalf("%s: no %v event", side, k)
			}
		}
	}
	// The client learns of its peer's endpoint from its configuration and
	// completes the handshake as initiator; the server learns the
	// client's endpoint from the initiation and completes the handshake
	// when the first packet under the new keys arrives.
	expect("client", clientEvents, sk.public, device.EndpointChanged, device.HandshakeCompleted)
	expect("server", serverEvents, ck.public, device.EndpointChanged, device.HandshakeCompleted)
	client.Close()
	server.Close()
	closed.Store(true)
	if n := late.Load(); n > 0 {
		t.Fatalf("OnEvent called %d times after Close returned", n)
	}
}
