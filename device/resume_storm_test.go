package device

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/peerstate"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun/memtun"
)

// The resumption storm: n clients with sessions to a server, the server
// restarted with the same configuration and its state file, and the time
// until every client has a new session that the server started. Clients
// are simulated (real handshakes with the noise package, each on its own
// loopback UDP socket) so that thousands fit in one test; the server is a
// Device on the ordinary UDP bind.

// stormClient is one simulated client. Its goroutine alone touches hs and
// the keypairs.
type stormClient struct {
	sock   *net.UDPConn
	server netip.AddrPort
	static *noise.Static
	hs     *noise.Handshake
	cg     *noise.CookieGenerator
	kp     *noise.Keypair // the session in use
	next   *noise.Keypair // answered the server's initiation, not yet confirmed
	nonce  noise.Nonce

	session     atomic.Bool  // has a session from its own initiation
	resumed     atomic.Int64 // when the server confirmed a session it started (UnixNano), 0: not yet
	initiations atomic.Int32 // initiations received from the server
	initiated   atomic.Int64 // when the first came (UnixNano)
}

func (c *stormClient) initiate(t testing.TB) {
	now := time.Now()
	m, err := c.hs.CreateInitiation(now, rand.Reader, 1)
	if err != nil {
		t.Error(err)
		return
	}
	b := m.AppendTo(nil)
	c.cg.AddMACs(b, now)
	c.sock.WriteToUDPAddrPort(b, c.server)
}

// run answers the server until the socket is closed.
func (c *stormClient) run() {
	buf := make([]byte, 2048)
	for {
		n, _, err := c.sock.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		c.handle(buf[:n])
	}
}

func (c *stormClient) handle(b []byte) {
	now := time.Now()
	switch noise.PeekType(b) {
	case noise.TypeResponse:
		r, err := noise.ParseResponse(b)
		if err != nil || c.hs.ConsumeResponse(&r, now) != nil {
			return
		}
		kp, err := c.hs.DeriveKeypair(now)
		if err != nil {
			return
		}
		c.kp = kp
		c.keepalive(kp)
		c.session.Store(true)
	case noise.TypeInitiation:
		c.initiations.Add(1)
		c.initiated.CompareAndSwap(0, now.UnixNano())
		m, err := noise.ParseInitiation(b)
		if err != nil {
			return
		}
		info, err := noise.OpenInitiation(c.static, &m)
		if err != nil || c.hs.AcceptInitiation(&info, now) != nil {
			return
		}
		r, err := c.hs.CreateResponse(rand.Reader, 2)
		if err != nil {
			return
		}
		out := r.AppendTo(nil)
		c.cg.AddMACs(out, now)
		if c.next, err = c.hs.DeriveKeypair(now); err != nil {
			return
		}
		c.sock.WriteToUDPAddrPort(out, c.server)
	case noise.TypeTransport:
		recv, ctr, err := noise.ParseTransportHeader(b)
		if err != nil || c.next == nil || recv != c.next.LocalIndex {
			return
		}
		if _, err := c.next.Open(&c.nonce, nil, ctr, b[noise.TransportHeaderSize:]); err != nil {
			return
		}
		c.kp, c.next = c.next, nil
		c.resumed.CompareAndSwap(0, now.UnixNano())
	}
}

func (c *stormClient) keepalive(kp *noise.Keypair) {
	ctr, ok := kp.NextCounter()
	if !ok {
		return
	}
	b := make([]byte, noise.TransportHeaderSize, noise.TransportHeaderSize+16)
	noise.PutTransportHeader(b, kp.RemoteIndex, ctr)
	c.sock.WriteToUDPAddrPort(kp.Seal(&c.nonce, b, ctr, nil), c.server)
}

// stormResult is what a resumption storm measured.
type stormResult struct {
	n                 int
	configured        time.Duration // from the restart until Apply returned
	p50, p99, last    time.Duration // from the restart until that share of clients resumed
	resumed           int
	lastInitiation    time.Duration // from the restart until the last client had its initiation
	initiationsRcvd   int           // initiations the clients received from the new server
	resumeInitiations uint64
	sessionsResumed   uint64
	queueFull         uint64
	cookies           uint64
}

func (r stormResult) String() string {
	return fmt.Sprintf("%d clients (configured in %.2f s): %d resumed, 50%% in %.2f s, 99%% in %.2f s, all in %.2f s (the last initiation at %.2f s); "+
		"%d initiations received (%d resume_initiations_sent, %d sessions_resumed), %d handshake queue drops, %d cookie replies",
		r.n, r.configured.Seconds(), r.resumed, r.p50.Seconds(), r.p99.Seconds(), r.last.Seconds(), r.lastInitiation.Seconds(),
		r.initiationsRcvd, r.resumeInitiations, r.sessionsResumed, r.queueFull, r.cookies)
}

// resumeStorm connects n clients to a server, restarts the server and
// waits (at most limit) until every client has a resumed session.
func resumeStorm(t testing.TB, n int, limit time.Duration) stormResult {
	lo := netip.MustParseAddr("127.0.0.1")
	serverKey, err := noise.GeneratePrivateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var cfg Config
	cfg.PrivateKey = &serverKey
	clients := make([]*stormClient, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range clients {
		key, err := noise.GeneratePrivateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		sock, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		defer sock.Close()
		st := noise.NewStatic(key)
		c := &stormClient{sock: sock, static: st, cg: noise.NewCookieGenerator(serverKey.PublicKey()),
			hs: noise.NewHandshake(st, serverKey.PublicKey(), noise.PresharedKey{})}
		clients[i] = c
		cfg.Peers = append(cfg.Peers, PeerConfig{
			PublicKey:  key.PublicKey(),
			AllowedIPs: []AllowedIPChange{{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), 32)}},
		})
	}
	opts := Options{StateFile: filepath.Join(t.TempDir(), "wg0.state")}
	first, err := New(memtun.New("s", 1420, 64), conn.NewDefault(conn.Options{}), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := first.Apply(&cfg); err != nil {
		t.Fatal(err)
	}
	opts.ListenPort = first.Status().ListenPort
	server := netip.AddrPortFrom(lo, opts.ListenPort)
	for _, c := range clients {
		c.server = server
		wg.Add(1)
		go func() { defer wg.Done(); c.run() }()
	}
	connectClients(t, clients)
	first.Close()
	b, err := os.ReadFile(opts.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, entries, err := peerstate.Parse(b); err != nil || len(entries) != n {
		t.Fatalf("the state file holds %d peers (%v), want %d", len(entries), err, n)
	}

	start := time.Now()
	d, err := New(memtun.New("s2", 1420, 64), conn.NewDefault(conn.Options{}), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Apply(&cfg); err != nil {
		t.Fatal(err)
	}
	configured := time.Since(start)
	deadline := start.Add(limit)
	for time.Now().Before(deadline) && countResumed(clients) < n {
		time.Sleep(10 * time.Millisecond)
	}
	r := stormReport(clients, start, d.Status())
	r.configured = configured
	return r
}

// connectClients gives every client a session, a wave at a time as a
// real server's clients come and go, each client retrying until answered.
func connectClients(t testing.TB, clients []*stormClient) {
	const wave = 250
	for i := 0; i < len(clients); i += wave {
		w := clients[i:min(len(clients), i+wave)]
		for try := 0; ; try++ {
			var waiting []*stormClient
			for _, c := range w {
				if !c.session.Load() {
					waiting = append(waiting, c)
				}
			}
			if len(waiting) == 0 {
				break
			}
			if try == 20 {
				t.Fatalf("%d clients have no session after %d tries", len(waiting), try)
			}
			for _, c := range waiting {
				c.initiate(t)
			}
			for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				if !slices.ContainsFunc(waiting, func(c *stormClient) bool { return !c.session.Load() }) {
					break
				}
			}
		}
	}
}

func countResumed(clients []*stormClient) (n int) {
	for _, c := range clients {
		if c.resumed.Load() != 0 {
			n++
		}
	}
	return n
}

func stormReport(clients []*stormClient, start time.Time, st Status) stormResult {
	r := stormResult{
		n:                 len(clients),
		resumeInitiations: counter(st, "resume_initiations_sent"),
		sessionsResumed:   counter(st, "sessions_resumed"),
		queueFull:         counter(st, "rx_drop_handshake_queue_full"),
		cookies:           counter(st, "cookie_replies_sent"),
	}
	var times []time.Duration
	for _, c := range clients {
		r.initiationsRcvd += int(c.initiations.Load())
		r.lastInitiation = max(r.lastInitiation, time.Duration(c.initiated.Load()-start.UnixNano()))
		if at := c.resumed.Load(); at != 0 {
			times = append(times, time.Duration(at-start.UnixNano()))
		}
	}
	r.resumed = len(times)
	if len(times) > 0 {
		slices.Sort(times)
		r.p50 = times[len(times)/2]
		r.p99 = times[len(times)*99/100]
		r.last = times[len(times)-1]
	}
	return r
}

// TestResumeStorm: a server with 500 recently active clients restarts;
// every one of them gets a new session that the server started, each at
// the server's first initiation (none lost to a full queue and retried
// Rekey-Timeout later). The 60 s limit only guards against a hang; the
// time is logged, and BenchmarkResumeStorm measures 10,000 clients.
func TestResumeStorm(t *testing.T) {
	const n = 500
	r := resumeStorm(t, n, 60*time.Second)
	t.Log(r)
	if r.resumed != n || r.sessionsResumed != n {
		t.Fatalf("%d clients resumed (the server counts %d), want %d", r.resumed, r.sessionsResumed, n)
	}
	if r.resumeInitiations != n || r.initiationsRcvd != n || r.queueFull != 0 || r.cookies != 0 {
		t.Errorf("%d resumption initiations sent, %d received, %d handshake queue drops, %d cookie replies: want %d, %d, 0, 0",
			r.resumeInitiations, r.initiationsRcvd, r.queueFull, r.cookies, n, n)
	}
}

// BenchmarkResumeStorm reports the time from a restart until the last of
// 10,000 recently active clients has a new session:
//
//	go test -run '^$' -bench ResumeStorm -benchtime 1x ./device/
func BenchmarkResumeStorm(b *testing.B) {
	const n = 10000
	for range b.N {
		r := resumeStorm(b, n, 60*time.Second)
		b.Log(r)
		if r.resumed != n {
			b.Fatalf("%d of %d clients resumed", r.resumed, n)
		}
		b.ReportMetric(r.last.Seconds(), "s-to-last")
		b.ReportMetric(r.p99.Seconds(), "s-to-99%")
	}
}
