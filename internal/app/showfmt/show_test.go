package showfmt_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/app/showfmt"
)

func showStatus() device.Status {
	st := sampleStatus()
	now := time.Unix(1700000000, 0)
	st.Peers[0].LastHandshake = now.Add(-(time.Hour*24*366 + time.Hour*2 + time.Minute + 3*time.Second))
	st.Peers[0].RxBytes = 1536
	st.Peers[0].TxBytes = 3<<20 + 3<<19
	st.Peers[1].LastHandshake = now.Add(-63 * time.Second)
	st.Peers[1].RxBytes = 12
	st.Peers[1].PersistentKeepalive = 3661
	st.Peers = append(st.Peers, device.PeerStatus{PublicKey: key(5), Endpoint: netip.MustParseAddrPort("[fe80::1%eth0]:51820"),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("::/0")}, TxBytes: 5 << 40})
	return st
}

func TestFormatShow(t *testing.T) {
	st := showStatus()
	pub := st.PublicKey.String()
	want := "interface: wg0\n" +
		"  public key: " + pub + "\n" +
		"  private key: (hidden)\n" +
		"  listening port: 51820\n" +
		"  fwmark: 0x20\n" +
		"\n" +
		"peer: " + b64(4) + "\n" +
		"  allowed ips: (none)\n" +
		"  latest handshake: 1 minute, 3 seconds ago\n" +
		"  transfer: 12 B received, 0 B sent\n" +
		"  persistent keepalive: every 1 hour, 1 minute, 1 second\n" +
		"\n" +
		"peer: " + b64(2) + "\n" +
		"  preshared key: (hidden)\n" +
		"  endpoint: 192.0.2.1:51820\n" +
		"  allowed ips: 10.0.0.0/8, fd00::/64\n" +
		"  latest handshake: 1 year, 1 day, 2 hours, 1 minute, 3 seconds ago\n" +
		"  transfer: 1.50 KiB received, 4.50 MiB sent\n" +
		"  persistent keepalive: every 25 seconds\n" +
		"\n" +
		"peer: " + b64(5) + "\n" +
		"  endpoint: [fe80::1%eth0]:51820\n" +
		"  allowed ips: ::/0\n" +
		"  transfer: 0 B received, 5.00 TiB sent\n" +
		"\n" +
		"counters:\n" +
		"  rx_drop_replay: 3\n" +
		"  handshakes: 9223372036854775808\n" +
		"  (1 more, all zero)\n"
	st.Counters = append(st.Counters, device.Counter{Name: "rx_drop_garbage"})
	var b bytes.Buffer
	if err := showfmt.FormatShow(&b, "wg0", st, showfmt.ShowOptions{Now: time.Unix(1700000000, 0), Counters: true}); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestFormatShowKeysAndEdges(t *testing.T) {
	priv := noise.PrivateKey(key(1))
	now := time.Unix(1000, 0)
	st := device.Status{PrivateKey: priv, Peers: []device.PeerStatus{
		{PublicKey: key(2), PresharedKey: key(3), LastHandshake: now, RxBytes: 1 << 30},
		{PublicKey: key(4), LastHandshake: now.Add(time.Minute)},
	}}
	want := "interface: wg1\n" +
		"  public key: " + priv.PublicKey().String() + "\n" +
		"  private key: " + b64(1) + "\n" +
		"\n" +
		"peer: " + b64(4) + "\n" +
		"  allowed ips: (none)\n" +
		"  latest handshake: (System clock wound backward; connection problems may ensue.)\n" +
		"\n" +
		"peer: " + b64(2) + "\n" +
		"  preshared key: " + b64(3) + "\n" +
		"  allowed ips: (none)\n" +
		"  latest handshake: Now\n" +
		"  transfer: 1.00 GiB received, 0 B sent\n"
	var b bytes.Buffer
	if err := showfmt.FormatShow(&b, "wg1", st, showfmt.ShowOptions{Now: now, ShowKeys: true}); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	showfmt.FormatShow(&b, "wg2", device.Status{}, showfmt.ShowOptions{})
	if b.String() != "interface: wg2\n" {
		t.Fatalf("empty device: %q", b.String())
	}
}

func TestFormatDump(t *testing.T) {
	st := showStatus()
	priv, pub := b64(1), st.PublicKey.String()
	want := priv + "\t" + pub + "\t51820\t0x20\n" +
		b64(2) + "\t" + b64(3) + "\t192.0.2.1:51820\t10.0.0.0/8,fd00::/64\t" + itoa(st.Peers[0].LastHandshake.Unix()) + "\t1536\t4718592\t25\n" +
		b64(4) + "\t(none)\t(none)\t(none)\t1699999937\t12\t0\t3661\n" +
		b64(5) + "\t(none)\t[fe80::1%eth0]:51820\t::/0\t0\t0\t5497558138880\toff\n"
	var b bytes.Buffer
	if err := showfmt.FormatDump(&b, "", st); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	showfmt.FormatDump(&b, "wg0", device.Status{ListenPort: 1})
	if b.String() != "wg0\t(none)\t(none)\t1\toff\n" {
		t.Fatalf("show all dump of an empty device: %q", b.String())
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A device.Status printed with fmt, as a log line or an error might, holds
// no private or preshared key in any encoding; the public ones stay.
func TestStatusPrintsNoSecrets(t *testing.T) {
	st := showStatus()
	for _, verb := range []string{"%v", "%+v", "%#v"} {
		out := fmt.Sprintf(verb, st)
		for _, secret := range []string{b64(1), hexKey(1), b64(3), hexKey(3)} {
			if strings.Contains(out, secret) {
				t.Errorf("Sprintf(%q, status) holds key material %q:\n%s", verb, secret, out)
			}
		}
		if !strings.Contains(out, "(private key)") || !strings.Contains(out, "(preshared key)") {
			t.Errorf("Sprintf(%q, status) lacks the redacted placeholders:\n%s", verb, out)
		}
	}
	if out := fmt.Sprintf("%v", st); !strings.Contains(out, b64(2)) {
		t.Errorf("public keys should still print:\n%s", out)
	}
}

// FormatShow prints the sandbox line under the interface.
func TestShowSandboxLine(t *testing.T) {
	var b strings.Builder
	if err := showfmt.FormatShow(&b, "wg0", device.Status{ListenPort: 51820}, showfmt.ShowOptions{Sandbox: "off"}); err != nil {
		t.Fatal(err)
	}
	if want := "interface: wg0\n  listening port: 51820\n  sandbox: off\n"; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}

func key(b byte) [32]byte {
	var k [32]byte
	for i := range k {
		k[i] = b
	}
	return k
}

// b64 is key(b) in base64, computed without the key types so that a change
// in how they print cannot make a test agree with the code under test.
func b64(b byte) string { k := key(b); return base64.StdEncoding.EncodeToString(k[:]) }

// sampleStatus is the status ipc's tests use too.
func sampleStatus() device.Status {
	priv := noise.PrivateKey(key(1))
	return device.Status{
		PrivateKey: priv,
		PublicKey:  priv.PublicKey(),
		ListenPort: 51820,
		FwMark:     0x20,
		Peers: []device.PeerStatus{{
			PublicKey:           key(2),
			PresharedKey:        key(3),
			Endpoint:            netip.MustParseAddrPort("192.0.2.1:51820"),
			LastHandshake:       time.Unix(1700000000, 123456789),
			TxBytes:             1 << 40,
			RxBytes:             12345,
			PersistentKeepalive: 25,
			AllowedIPs:          []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/64")},
			ProtocolVersion:     1,
		}, {
			PublicKey:       key(4),
			ProtocolVersion: 1,
		}},
		Counters: []device.Counter{{Name: "rx_drop_replay", Value: 3}, {Name: "handshakes", Value: 1 << 63}},
	}
}

func hexKey(b byte) string { return strings.Repeat(fmt.Sprintf("%02x", b), 32) }

// TestShowPathMTU: fips-go's own form shows a peer's known path MTU and
// where it came from; the form that prints what wg prints does not.
func TestShowPathMTU(t *testing.T) {
	st := device.Status{ListenPort: 51820, Peers: []device.PeerStatus{{PublicKey: key(2), PathMTU: 1276, PathMTUSource: "probe"}}}
	for _, counters := range []bool{true, false} {
		var b strings.Builder
		if err := showfmt.FormatShow(&b, "wg0", st, showfmt.ShowOptions{Counters: counters}); err != nil {
			t.Fatal(err)
		}
		line := "  path mtu: 1276 (confirmed by probes)\n"
		if got := strings.Contains(b.String(), line); got != counters {
			t.Fatalf("counters %v: path MTU line shown %v:\n%s", counters, got, b.String())
		}
	}
	st.Peers[0].PathMTU, st.Peers[0].PathMTUSource = 1280, "tcp"
	var b strings.Builder
	if err := showfmt.FormatShow(&b, "wg0", st, showfmt.ShowOptions{Counters: true}); err != nil {
		t.Fatal(err)
	}
	if line := "  path mtu: 1280 (a floor: full-size TCP segments vanished)\n"; !strings.Contains(b.String(), line) {
		t.Fatalf("no %q in\n%s", line, b.String())
	}
}

// TestShowPathProbes: fips-go's own form says which peers are probed, and
// which are kept from probes by their own setting; a peer that follows an
// off default shows nothing.
func TestShowPathProbes(t *testing.T) {
	off := false
	st := device.Status{ListenPort: 51820, Peers: []device.PeerStatus{
		{PublicKey: key(2), PathProbesOn: true},
		{PublicKey: key(3), PathProbes: &off},
		{PublicKey: key(4)},
	}}
	var b strings.Builder
	if err := showfmt.FormatShow(&b, "wg0", st, showfmt.ShowOptions{Counters: true}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, line := range []string{"  path probes: on\n", "  path probes: off (set for this peer)\n"} {
		if strings.Count(out, line) != 1 {
			t.Fatalf("want one %q in\n%s", line, out)
		}
	}
	if n := strings.Count(out, "path probes"); n != 2 {
		t.Fatalf("%d probe lines, want 2:\n%s", n, out)
	}
}

// Each peer's transport line: a peer on UDP by auto says so, one on a
// stream says which and whether through the proxy; a plain UDP peer has
// none (the output stays wg's).
func TestShowTransport(t *testing.T) {
	ep := netip.MustParseAddrPort("192.0.2.1:443")
	for _, c := range []struct {
		ps   device.PeerStatus
		want string
	}{
		{device.PeerStatus{Endpoint: ep}, ""},
		{device.PeerStatus{Endpoint: ep, TransportSetting: conn.TransportAuto}, "  transport: udp (auto)\n"},
		{device.PeerStatus{Endpoint: ep, Transport: conn.TransportTCP}, "  transport: tcp\n"},
		{device.PeerStatus{Endpoint: ep, Transport: conn.TransportTLS, TransportSetting: conn.TransportAuto, ViaProxy: true},
			"  transport: tls via proxy (auto)\n"},
	} {
		c.ps.PublicKey = key(1)
		var b bytes.Buffer
		showfmt.FormatShow(&b, "wg0", device.Status{Peers: []device.PeerStatus{c.ps}}, showfmt.ShowOptions{})
		got := ""
		for _, line := range strings.SplitAfter(b.String(), "\n") {
			if strings.Contains(line, "transport") {
				got += line
			}
		}
		if got != c.want {
			t.Errorf("%+v: %q, want %q", c.ps, got, c.want)
		}
	}
}
