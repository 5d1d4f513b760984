package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dropAllUDP makes the router between the pair pass no UDP at all, as a
// hotel or corporate network that lets only TCP through.
var dropAllUDP = []string{"FORWARD", "-p", "udp", "-j", "DROP"}

// streamPair is a routed pair whose router drops every UDP datagram, with
// B's stream listener on (its UDP port number, in TCP) and A's peer set to
// reach B over it.
func streamPair(t *testing.T) *pair {
	t.Helper()
	requireTool(t, "iptables")
	p := newPair(t, pairOpts{routed: true, noV6Overlay: true, onlyAKnows: true})
	p.router.Run(append([]string{"iptables", "-A"}, dropAllUDP...)...)
	p.b.fipsctl("set", p.b.iface, "tcp-listen", "on")
	ep := netip.AddrPortFrom(p.link.addrB(), uint16(p.b.port))
	p.a.fipsctl("set", p.a.iface, "peer", p.b.key.pub, "endpoint", ep.String(), "transport", "tcp")
	return p
}

// TestStreamWhenUDPIsBlocked: with all UDP dropped between them, a client
// whose peer uses the stream transport has a tunnel within 10 s, and the
// tunnel carries TCP to completion; both ends say the peer uses TCP.
func TestStreamWhenUDPIsBlocked(t *testing.T) {
	p := streamPair(t)
	start := time.Now()
	p.a.ns.waitPing(p.b.tun4, 10*time.Second)
	t.Logf("tunnel up over TCP in %v", time.Since(start).Round(time.Millisecond))
	tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5011), helperSpec{Bytes: 8 << 20, Seed: 31})
	tcpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun4, 5012), helperSpec{Bytes: 8 << 20, Seed: 32})
	for _, n := range []*node{p.a, p.b} {
		if out := n.fipsctl("show", n.iface); !strings.Contains(out, "transport: tcp") {
			t.Errorf("%s: show does not say the peer uses TCP:\n%s", n.iface, out)
		}
	}
	if out := p.b.fipsctl("show", p.b.iface); !strings.Contains(out, "tcp listening port: ") {
		t.Errorf("show does not report the stream listener:\n%s", out)
	}
	if c := p.b.counters()["stream_conns_accepted"]; c < 1 {
		t.Errorf("stream_conns_accepted = %d", c)
	}
}

// TestStreamThroughput measures single-stream TCP through the tunnel over
// plain UDP and over the stream transport, in the same run, three times
// each, and logs the medians (docs/transports.md). It asserts only that
// every transfer completes.
func TestStreamThroughput(t *testing.T) {
	requireTool(t, "iptables")
	const size = 128 << 20
	run := func(stream bool, seed int) float64 {
		o := pairOpts{routed: true, noV6Overlay: true, onlyAKnows: true}
		p := newPair(t, o)
		if stream {
			p.router.Run(append([]string{"iptables", "-A"}, dropAllUDP...)...)
			p.b.fipsctl("set", p.b.iface, "tcp-listen", "on")
			ep := netip.AddrPortFrom(p.link.addrB(), uint16(p.b.port))
			p.a.fipsctl("set", p.a.iface, "peer", p.b.key.pub, "endpoint", ep.String(), "transport", "tcp")
		}
		p.a.ns.waitPing(p.b.tun4, 10*time.Second)
		r := tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5020+seed), helperSpec{Bytes: size, Seed: uint64(seed)})
		return mbit(r.Bytes, r.Seconds)
	}
	var udp, tcp []float64
	for i := range 3 {
		udp = append(udp, run(false, 40+2*i))
		tcp = append(tcp, run(true, 41+2*i))
	}
	mu, mt := median(udp), median(tcp)
	t.Logf("single TCP stream through the tunnel, %d MiB, 3 runs each: UDP %v Mbit/s (median %.0f), TCP framing %v Mbit/s (median %.0f): %.0f%% of UDP",
		size>>20, rounded(udp), mu, rounded(tcp), mt, 100*mt/mu)
}

func rounded(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x + 0.5)
	}
	return out
}

// TestStreamAutoFallback: a client peer with transport auto behind a
// router that drops all UDP tries UDP, falls back to the stream after one
// unanswered initiation (Rekey-Timeout, 5 s), and carries TCP.
func TestStreamAutoFallback(t *testing.T) {
	requireTool(t, "iptables")
	p := newPair(t, pairOpts{routed: true, noV6Overlay: true, onlyAKnows: true})
	p.router.Run(append([]string{"iptables", "-A"}, dropAllUDP...)...)
	p.b.fipsctl("set", p.b.iface, "tcp-listen", "on")
	p.a.fipsctl("set", p.a.iface, "peer", p.b.key.pub, "transport", "auto")
	start := time.Now()
	p.a.ns.waitPing(p.b.tun4, 15*time.Second)
	t.Logf("tunnel up after the fallback in %v", time.Since(start).Round(time.Millisecond))
	tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5013), helperSpec{Bytes: 8 << 20, Seed: 33})
	if out := p.a.fipsctl("show", p.a.iface); !strings.Contains(out, "transport: tcp") {
		t.Errorf("show does not say the peer fell back to TCP:\n%s", out)
	}
	if n := censorDrops(t, p.router); n == 0 {
		t.Error("no UDP was tried before the stream")
	}
}

// TestStreamAutoSwitchBack: a peer with transport auto that fell back to
// the stream while UDP was blocked returns to UDP by itself once the
// router passes UDP again, while traffic flows: the next UDP probe (5 s
// after the fall back) is answered. The deadline is the documented worst
// case (35 s) with room for a loaded machine; the time is logged.
func TestStreamAutoSwitchBack(t *testing.T) {
	requireTool(t, "iptables")
	p := newPair(t, pairOpts{routed: true, noV6Overlay: true, onlyAKnows: true})
	p.router.Run(append([]string{"iptables", "-A"}, dropAllUDP...)...)
	p.b.fipsctl("set", p.b.iface, "tcp-listen", "on")
	p.a.fipsctl("set", p.a.iface, "peer", p.b.key.pub, "transport", "auto")
	p.a.ns.waitPing(p.b.tun4, 15*time.Second)
	if out := p.a.fipsctl("show", p.a.iface); !strings.Contains(out, "transport: tcp (auto)") {
		t.Fatalf("the peer did not fall back to TCP:\n%s", out)
	}
	p.router.Run(append([]string{"iptables", "-D"}, dropAllUDP...)...)
	start := time.Now()
	background(t, p.a.ns, "ping", "-q", "-i", "0.5", p.b.tun4.String())
	for !strings.Contains(p.a.fipsctl("show", p.a.iface), "transport: udp (auto)") {
		if time.Since(start) > 60*time.Second {
			t.Fatalf("still not back on UDP %v after UDP passed:\n%s", time.Since(start).Round(time.Second), p.a.fipsctl("show", p.a.iface))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("back on UDP %v after UDP passed", time.Since(start).Round(100*time.Millisecond))
	tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5017), helperSpec{Bytes: 8 << 20, Seed: 37})
}

// startTinyproxy runs tinyproxy in ns on addr:8888, allowing CONNECT to
// port 443 only, as a corporate proxy would, and returns its URL. Its log
// is in the test's temporary directory.
func startTinyproxy(t *testing.T, ns *netns, addr netip.Addr) string {
	t.Helper()
	requireTool(t, "tinyproxy")
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	log := filepath.Join(dir, "tinyproxy.log")
	conf := fmt.Sprintf("User nobody\nGroup nogroup\nPort 8888\nListen %s\nTimeout 600\nMaxClients 64\n"+
		"Allow 10.1.0.0/24\nConnectPort 443\nLogLevel Info\nLogFile %q\n", addr, log)
	path := filepath.Join(dir, "tinyproxy.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(log, nil, 0o666)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := ns.Command(ctx, "tinyproxy", "-d", "-c", path)
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("tinyproxy log:\n%s", b)
		}
	})
	ap := netip.AddrPortFrom(addr, 8888)
	eventually(t, 5*time.Second, "tinyproxy listening", func() bool {
		_, err := ns.Try("bash", "-c", "exec 3<>/dev/tcp/"+addr.String()+"/8888")
		return err == nil
	})
	return "http://" + ap.String()
}

// TestStreamTLSThroughProxy: the router forwards nothing at all, neither
// UDP nor TCP; the only way out of A's network is tinyproxy on the router,
// which allows CONNECT to port 443. B listens for streams on TCP 443; A's
// peer uses TLS through the proxy. The tunnel comes up within 10 s and
// carries TCP both ways, and show says how.
func TestStreamTLSThroughProxy(t *testing.T) {
	requireTool(t, "iptables", "tinyproxy")
	p := newPair(t, pairOpts{routed: true, noV6Overlay: true, onlyAKnows: true})
	p.router.Run("iptables", "-A", "FORWARD", "-j", "DROP")
	// The router's address on A's link (routedLink joins A and the
	// router on 10.1.0.0/24, the router second).
	proxy := startTinyproxy(t, p.router, netip.MustParseAddr("10.1.0.2"))
	certFile, keyFile := writeTestCert(t, "www.example.com")
	p.b.fipsctl("set", p.b.iface, "tcp-listen", "443", "tls-certificate", certFile, "tls-key", keyFile)
	ep := netip.AddrPortFrom(p.link.addrB(), 443)
	p.a.fipsctl("set", p.a.iface, "proxy", proxy, "peer", p.b.key.pub, "endpoint", ep.String(),
		"transport", "tls", "tls-server-name", "www.example.com")
	start := time.Now()
	p.a.ns.waitPing(p.b.tun4, 10*time.Second)
	t.Logf("tunnel up over TLS through the proxy in %v", time.Since(start).Round(time.Millisecond))
	tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5014), helperSpec{Bytes: 8 << 20, Seed: 34})
	tcpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun4, 5015), helperSpec{Bytes: 8 << 20, Seed: 35})
	out := p.a.fipsctl("show", p.a.iface)
	for _, want := range []string{"transport: tls via proxy", "proxy: " + proxy} {
		if !strings.Contains(out, want) {
			t.Errorf("A's show has no %q:\n%s", want, out)
		}
	}
	out = p.b.fipsctl("show", p.b.iface)
	for _, want := range []string{"transport: tls", "tls certificate: www.example.com"} {
		if !strings.Contains(out, want) {
			t.Errorf("B's show has no %q:\n%s", want, out)
		}
	}
	if c := p.b.counters()["stream_tls_accepted"]; c < 1 {
		t.Errorf("stream_tls_accepted = %d", c)
	}
}

// plainStreamCensor drops TCP segments whose payload starts with a plain
// stream's framed WireGuard initiation (length 148, then type 1, 0, 0):
// a middlebox that recognises udp-over-tcp but lets TLS through.
var plainStreamCensor = []string{"FORWARD", "-p", "tcp", "-m", "u32", "--u32",
	"0>>22&0x3C@12>>26&0x3C@0=0x00940100", "-j", "DROP"}

// ruleDrops is the packet count of the router's FORWARD rule whose line
// contains match.
func ruleDrops(t *testing.T, r *netns, match string) int {
	t.Helper()
	for _, line := range strings.Split(r.Run("iptables", "-L", "FORWARD", "-v", "-n", "-x"), "\n") {
		if f := strings.Fields(line); len(f) > 2 && strings.Contains(line, match) {
			n, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatalf("iptables counters: %q", line)
			}
			return n
		}
	}
	t.Fatalf("no rule matching %q", match)
	return 0
}

// TestStreamAutoRacesTLS: the router drops all UDP and every plain stream
// that opens with a WireGuard initiation, but passes TLS. A peer set to
// auto tries UDP, then races TCP and TLS (TLS 250 ms behind): TCP loses,
// TLS carries the tunnel, and show says so.
func TestStreamAutoRacesTLS(t *testing.T) {
	requireTool(t, "iptables")
	p := newPair(t, pairOpts{routed: true, noV6Overlay: true, onlyAKnows: true})
	p.router.Run(append([]string{"iptables", "-A"}, dropAllUDP...)...)
	p.router.Run(append([]string{"iptables", "-A"}, plainStreamCensor...)...)
	p.b.fipsctl("set", p.b.iface, "tcp-listen", "on")
	p.a.fipsctl("set", p.a.iface, "peer", p.b.key.pub, "transport", "auto")
	start := time.Now()
	p.a.ns.waitPing(p.b.tun4, 15*time.Second)
	t.Logf("tunnel up after the fallback race in %v", time.Since(start).Round(time.Millisecond))
	tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5016), helperSpec{Bytes: 8 << 20, Seed: 36})
	if out := p.a.fipsctl("show", p.a.iface); !strings.Contains(out, "transport: tls (auto)") {
		t.Errorf("show does not say the peer is on TLS:\n%s", out)
	}
	if n := ruleDrops(t, p.router, "u32"); n == 0 {
		t.Error("no plain stream was tried before TLS")
	}
	if n := censorDrops(t, p.router); n == 0 {
		t.Error("no UDP was tried first")
	}
}

// writeTestCert writes a self-signed certificate for name and its key as
// PEM files, as a user with a real certificate would have them.
func writeTestCert(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: []string{name}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}
