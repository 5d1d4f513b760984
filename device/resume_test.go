package device

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
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
