package device

import (
	"crypto/rand"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun/memtun"
)

// restartServer runs a client and a server (which knows no endpoint for
// the client) until they have exchanged data, stops the server and starts
// it again with the same key, port and state file, with its clock moved
// on by skew. It returns the client, the new server and its state file.
func restartServer(t *testing.T, skew time.Duration) (client, server *node) {
	t.Helper()
	netw := membind.NewNetwork(membind.NetOptions{})
	hostS, hostC := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	state := filepath.Join(t.TempDir(), "wg0.state")
	opts := Options{StateFile: state, ListenPort: 51820}
	s := newNode(t, memtun.New("s", 1420, 4096), netw.NewBind(hostS), addrA, hostS, opts)
	c := newNode(t, memtun.New("c", 1420, 4096), netw.NewBind(hostC), addrB, hostC, Options{})
	link(t, c, s)
	ping := udpPacket(addrB, addrA, 1, 100)
	c.tun.(*memtun.Device).Inject(ping)
	next(t, s.tun, 5*time.Second)
	s.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 2, 100))
	next(t, c.tun, 5*time.Second)
	s.dev.Close()
	if fi, err := os.Stat(state); err != nil || fi.Size() == 0 {
		t.Fatalf("no state written at close: %v", err)
	}

	opts.Now = func() time.Time { return time.Now().Add(skew) }
	d, err := New(memtun.New("s2", 1420, 4096), netw.NewBind(hostS), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s2 := &node{dev: d, tun: d.tun, key: s.key, addr: addrA, ep: s.ep}
	if err := d.Apply(&Config{PrivateKey: &s.key, Peers: []PeerConfig{{
		PublicKey:  c.key.PublicKey(),
		AllowedIPs: []AllowedIPChange{{Prefix: netip.PrefixFrom(addrB, 32)}},
	}}}); err != nil {
		t.Fatal(err)
	}
	return c, s2
}

func TestRestartedServerResumesItsPeers(t *testing.T) {
	c, s := restartServer(t, 0)
	// The new process initiates, the client answers, the keepalive that
	// follows confirms the session on the client: data flows both ways
	// without the client ever starting a handshake of its own again.
	eventually(t, 5*time.Second, "a resumed session", func() bool {
		return counter(s.dev.Status(), "sessions_resumed") == 1
	})
	s.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 3, 100))
	next(t, c.tun, 5*time.Second)
	c.tun.(*memtun.Device).Inject(udpPacket(addrB, addrA, 4, 100))
	next(t, s.tun, 5*time.Second)
	st := s.dev.Status()
	if n := counter(st, "resume_initiations_sent"); n != 1 {
		t.Fatalf("resume_initiations_sent = %d, want 1", n)
	}
	if n := counter(c.dev.Status(), "handshake_initiations_sent"); n != 1 {
		t.Fatalf("the client sent %d initiations, want only its first", n)
	}
	// Another configuration request does not resume again.
	if err := s.dev.Apply(&Config{}); err != nil {
		t.Fatal(err)
	}
	if n := counter(s.dev.Status(), "resume_initiations_sent"); n != 1 {
		t.Fatalf("resume_initiations_sent = %d after another set, want 1", n)
	}
}

func TestStaleStateIsIgnored(t *testing.T) {
	// Three minutes later the peers have moved on: nothing is resumed and
	// the server sends nothing to the remembered address.
	_, s := restartServer(t, 3*time.Minute)
	time.Sleep(100 * time.Millisecond)
	st := s.dev.Status()
	if n := counter(st, "resume_initiations_sent") + counter(st, "handshake_initiations_sent"); n != 0 {
		t.Fatalf("%d initiations from stale state", n)
	}
	if ep := st.Peers[0].Endpoint; ep.IsValid() {
		t.Fatalf("stale endpoint %v used", ep)
	}
}

// The resumption pace: 10,000 remembered peers must all have their
// initiation within the 5 s a restart may cost them, with time left for
// the handshakes, so the device sends resumeRate a second (at 1,000 a
// second the last of 10,000 waited 10 s), and no faster: the rate is what
// bounds what a state file can make the device send.
func TestResumePace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const peers = 1000
		netw := membind.NewNetwork(membind.NetOptions{})
		host := netip.MustParseAddr("192.0.2.1")
		s := newNode(t, memtun.New("s", 1420, 64), netw.NewBind(host), addrA, host, Options{})
		var cfg Config
		for i := range peers {
			key, err := noise.GeneratePrivateKey(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			// Nobody listens there: the initiations go unanswered.
			ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 99, byte(i >> 8), byte(i)}), 51820)
			cfg.Peers = append(cfg.Peers, PeerConfig{PublicKey: key.PublicKey(), Endpoint: &ep})
		}
		if err := s.dev.Apply(&cfg); err != nil {
			t.Fatal(err)
		}
		var todo []*Peer
		for _, p := range s.dev.peers {
			todo = append(todo, p)
		}
		start := time.Now()
		s.dev.helpersWG.Add(1)
		s.dev.resumePeers(todo)
		took := time.Since(start)
		if n := counter(s.dev.Status(), "resume_initiations_sent"); n != peers {
			t.Fatalf("resume_initiations_sent = %d, want %d", n, peers)
		}
		// 1,000 in 0.2 s: 10,000 in 2 s. Not faster than resumeRate either.
		if limit := peers * 2 * time.Second / 10000; took > limit+5*time.Millisecond {
			t.Fatalf("%d initiations took %v, want at most %v", peers, took, limit)
		}
		if floor := peers * time.Second / resumeRate; took < floor-5*time.Millisecond {
			t.Fatalf("%d initiations took %v, faster than %d a second", peers, took, resumeRate)
		}
	})
}
