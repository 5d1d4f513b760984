package ipc_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/ipc"
)

// b64 is key(b) in base64, computed without the key types so that a change
// in how they print cannot make a test agree with the code under test.
func b64(b byte) string { k := key(b); return base64.StdEncoding.EncodeToString(k[:]) }

// fakeResolve knows one host name.
func fakeResolve(host string) ([]netip.Addr, error) {
	if host == "test.wireguard.com" {
		return []netip.Addr{netip.MustParseAddr("::ffff:192.0.2.7"), netip.MustParseAddr("2001:db8::7")}, nil
	}
	return nil, errors.New("no such host")
}

func parseConf(t *testing.T, text string) *device.Config {
	t.Helper()
	cfg, _, err := ipc.ParseConfigFile(strings.NewReader(text), "wg0.conf", fakeResolve)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestParseConfigFileManExample parses the example of wg(8) (with our
// keys), which uses comments, spacing, a bracketed IPv6 endpoint, host bits
// in an allowed IP and a host name.
func TestParseConfigFileManExample(t *testing.T) {
	text := `[Interface]
PrivateKey = ` + b64(1) + `
ListenPort = 51820

[Peer]
PublicKey = ` + b64(2) + `
Endpoint = 192.95.5.67:1234
AllowedIPs = 10.192.122.3/32, 10.192.124.1/24

[Peer]
PublicKey = ` + b64(3) + `
Endpoint = [2607:5300:60:6b0::c05f:543]:2468
AllowedIPs = 10.192.122.4/32, 192.168.0.0/16

[Peer]
PublicKey = ` + b64(4) + ` # a comment
Endpoint = test.wireguard.com:18981
AllowedIPs = 10.10.10.230/32
`
	pfx := netip.MustParsePrefix
	add := func(ps ...string) []device.AllowedIPChange {
		var out []device.AllowedIPChange
		for _, p := range ps {
			out = append(out, device.AllowedIPChange{Prefix: pfx(p)})
		}
		return out
	}
	want := &device.Config{
		PrivateKey:   ptr(noise.PrivateKey(key(1))),
		ListenPort:   ptr(uint16(51820)),
		FwMark:       ptr(uint32(0)),
		ReplacePeers: true,
		Peers: []device.PeerConfig{
			{PublicKey: key(2), Endpoint: ptr(netip.MustParseAddrPort("192.95.5.67:1234")), ReplaceAllowedIPs: true,
				AllowedIPs: add("10.192.122.3/32", "10.192.124.0/24")},
			{PublicKey: key(3), Endpoint: ptr(netip.MustParseAddrPort("[2607:5300:60:6b0::c05f:543]:2468")), ReplaceAllowedIPs: true,
				AllowedIPs: add("10.192.122.4/32", "192.168.0.0/16")},
			{PublicKey: key(4), Endpoint: ptr(netip.MustParseAddrPort("192.0.2.7:18981")), ReplaceAllowedIPs: true,
				AllowedIPs: add("10.10.10.230/32")},
		},
	}
	if got := parseConf(t, text); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseConfigFileSyntax(t *testing.T) {
	text := "  [interface]  \n" +
		"privatekey=" + b64(1) + "\n" +
		"FWMARK = 0x1f\n" +
		"[PEER]\n" +
		"publickey = " + b64(2) + "\n" +
		"PresharedKey=" + b64(3) + "\n" +
		"allowedips = 10.0.0.1, fd00::1\n" +
		"AllowedIPs = 10.1.0.0/016\n" +
		"Persistent Keepalive = off\n" +
		"[Peer]\nPublicKey=" + b64(4) + "\nPersistentKeepalive=25\nAllowedIPs=\n"
	got := parseConf(t, text)
	if *got.FwMark != 0x1f || *got.PrivateKey != noise.PrivateKey(key(1)) || *got.ListenPort != 0 {
		t.Errorf("interface: %+v", got)
	}
	p := got.Peers[0]
	wantIPs := []device.AllowedIPChange{{Prefix: netip.MustParsePrefix("10.0.0.1/32")},
		{Prefix: netip.MustParsePrefix("fd00::1/128")}, {Prefix: netip.MustParsePrefix("10.1.0.0/16")}}
	if *p.PresharedKey != noise.PresharedKey(key(3)) || *p.PersistentKeepalive != 0 || !p.ReplaceAllowedIPs ||
		!reflect.DeepEqual(p.AllowedIPs, wantIPs) {
		t.Errorf("peer 0: %+v", p)
	}
	if p := got.Peers[1]; *p.PersistentKeepalive != 25 || !p.ReplaceAllowedIPs || p.AllowedIPs != nil {
		t.Errorf("peer 1: %+v", p)
	}
}

func TestParseConfigFileIncrementalAllowedIPs(t *testing.T) {
	got := parseConf(t, "[Peer]\nPublicKey="+b64(2)+"\nAllowedIPs = +10.0.0.0/8, -10.1.0.0/16, 10.2.0.0/16\n")
	want := []device.AllowedIPChange{{Prefix: netip.MustParsePrefix("10.0.0.0/8")},
		{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Remove: true}, {Prefix: netip.MustParsePrefix("10.2.0.0/16")}}
	if p := got.Peers[0]; p.ReplaceAllowedIPs || !reflect.DeepEqual(p.AllowedIPs, want) {
		t.Fatalf("%+v", p)
	}
}

func TestParseAddConfigFile(t *testing.T) {
	text := "[Interface]\nListenPort=7\n[Peer]\nPublicKey=" + b64(2) + "\n"
	got, _, err := ipc.ParseAddConfigFile(strings.NewReader(text), "x.conf", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &device.Config{ListenPort: ptr(uint16(7)), Peers: []device.PeerConfig{{PublicKey: key(2), ReplaceAllowedIPs: true}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestParseConfigFileErrors(t *testing.T) {
	peer := "[Peer]\nPublicKey=" + b64(2) + "\n"
	tests := []struct {
		text string
		line int
		msg  string
	}{
		{"PrivateKey=" + b64(1), 1, "before any [Interface] or [Peer]"},
		{"[Interface]\nAddress = 10.0.0.1/24", 2, "wg-quick key"},
		{"[Interface]\n\nPostUp = iptables", 3, "wg-quick key"},
		{"[Interface]\nBogus=1", 2, "unknown [Interface] key"},
		{"[Interface]\nPrivateKey=abc", 2, "PrivateKey"},
		{"[Interface]\nListenPort=65536", 2, "ListenPort"},
		{"[Interface]\nListenPort=", 2, "ListenPort"},
		{"[Interface]\nListenPort=http", 2, "ListenPort"},
		{"[Interface]\nFwMark=0XFF", 2, "FwMark"},
		{"[Interface]\nFwMark=0x", 2, "FwMark"},
		{"[Interface]\nFwMark=4294967296", 2, "FwMark"},
		{"[Interface]\nFwMark=-1", 2, "FwMark"},
		{"[Interface]\njunk", 2, "line unrecognized"},
		{"[Interface]\n[Peer]\nEndpoint=1.2.3.4:5", 2, "no PublicKey"},
		{peer + "PublicKey=" + b64(3)[:43], 3, "PublicKey"},
		{peer + "PresharedKey=zz", 3, "PresharedKey"},
		{peer + "AllowedIPs=10.0.0.0/33", 3, "AllowedIPs"},
		{peer + "AllowedIPs=10.0.0.0/", 3, "AllowedIPs"},
		{peer + "AllowedIPs=10.0.0.0/8,,", 3, "AllowedIPs"},
		{peer + "AllowedIPs=fe80::%eth0/64", 3, "AllowedIPs"},
		{peer + "AllowedIPs=010.0.0.0/8", 3, "AllowedIPs"},
		{peer + "Endpoint=1.2.3.4", 3, "Endpoint"},
		{peer + "Endpoint=[::1:5", 3, "Endpoint"},
		{peer + "Endpoint=[::1]5", 3, "Endpoint"},
		{peer + "Endpoint=1.2.3.4:99999", 3, "Endpoint"},
		{peer + "Endpoint=nowhere.example:5", 3, "no such host"},
		{peer + "Endpoint=:5", 3, "Endpoint"},
		{peer + "PersistentKeepalive=65536", 3, "PersistentKeepalive"},
		{peer + "PersistentKeepalive=on", 3, "PersistentKeepalive"},
		{peer + "ListenPort=1", 3, "unknown [Peer] key"},
		{"[Interface]\n" + strings.Repeat("#", 2<<20), 2, "longer than"},
	}
	for _, tt := range tests {
		_, _, err := ipc.ParseConfigFile(strings.NewReader(tt.text), "wg0.conf", fakeResolve)
		var ce *ipc.ConfigError
		if !errors.As(err, &ce) || ce.Line != tt.line || ce.File != "wg0.conf" {
			t.Errorf("%.40q: err %v, want an error at wg0.conf:%d", tt.text, err, tt.line)
			continue
		}
		if prefix := fmt.Sprintf("wg0.conf:%d: ", tt.line); !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%.40q: message %q, want %q... mentioning %q", tt.text, err, prefix, tt.msg)
		}
	}
	// Host names need a resolver.
	if _, _, err := ipc.ParseConfigFile(strings.NewReader(peer+"Endpoint=test.wireguard.com:1"), "f", nil); err == nil {
		t.Error("host name accepted without a resolver")
	}
}

func TestStripQuickConfig(t *testing.T) {
	text := "[Interface] # wg-quick file\n" +
		"Address = 10.0.0.1/24, fd00::1/64\n" +
		"dns=1.1.1.1\n" +
		"MTU = 1420\nTable=off\nPreUp=true\nPostUp = echo # up\nPreDown=x\nPostDown=y\nSaveConfig=true\n" +
		"PrivateKey = " + b64(1) + "\n" +
		"[Peer]\nPublicKey = " + b64(2) + "\n" +
		"AllowedIPs = 0.0.0.0/0\n"
	want := "[Interface] # wg-quick file\n" +
		"PrivateKey = " + b64(1) + "\n" +
		"[Peer]\nPublicKey = " + b64(2) + "\n" +
		"AllowedIPs = 0.0.0.0/0\n"
	got := ipc.StripQuickConfig(text)
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if _, _, err := ipc.ParseConfigFile(strings.NewReader(got), "f", nil); err != nil {
		t.Fatal(err)
	}
	// Only [Interface] keys are stripped.
	if _, _, err := ipc.ParseConfigFile(strings.NewReader(ipc.StripQuickConfig("[Peer]\nPublicKey="+b64(2)+"\nDNS=1.1.1.1\n")), "f", nil); err == nil {
		t.Fatal("DNS in a [Peer] section was stripped")
	}
}

// statusToConfig is what ParseConfigFile should return for FormatConfig(st).
func statusToConfig(st device.Status) *device.Config {
	cfg := &device.Config{
		PrivateKey:   ptr(st.PrivateKey),
		ListenPort:   ptr(st.ListenPort),
		FwMark:       ptr(st.FwMark),
		ReplacePeers: true,
	}
	for _, ps := range st.Peers {
		pc := device.PeerConfig{PublicKey: ps.PublicKey, ReplaceAllowedIPs: true}
		if !ps.PresharedKey.IsZero() {
			pc.PresharedKey = ptr(ps.PresharedKey)
		}
		if ps.Endpoint.IsValid() {
			pc.Endpoint = ptr(ps.Endpoint)
		}
		if ps.PersistentKeepalive != 0 {
			pc.PersistentKeepalive = ptr(ps.PersistentKeepalive)
		}
		for _, p := range ps.AllowedIPs {
			pc.AllowedIPs = append(pc.AllowedIPs, device.AllowedIPChange{Prefix: p})
		}
		cfg.Peers = append(cfg.Peers, pc)
	}
	return cfg
}

func TestFormatConfig(t *testing.T) {
	st := sampleStatus()
	want := "[Interface]\n" +
		"ListenPort = 51820\n" +
		"FwMark = 0x20\n" +
		"PrivateKey = " + b64(1) + "\n" +
		"\n" +
		"[Peer]\n" +
		"PublicKey = " + b64(2) + "\n" +
		"PresharedKey = " + b64(3) + "\n" +
		"AllowedIPs = 10.0.0.0/8, fd00::/64\n" +
		"Endpoint = 192.0.2.1:51820\n" +
		"PersistentKeepalive = 25\n" +
		"\n" +
		"[Peer]\n" +
		"PublicKey = " + b64(4) + "\n"
	got := ipc.FormatConfig(st)
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	back := parseConf(t, got)
	if w := statusToConfig(st); !reflect.DeepEqual(back, w) {
		t.Fatalf("round trip:\ngot  %+v\nwant %+v", back, w)
	}
}

func TestSyncConfig(t *testing.T) {
	cur := device.Status{Peers: []device.PeerStatus{
		{PublicKey: key(2), PresharedKey: key(9), PersistentKeepalive: 25}, // stays, loses psk and keepalive
		{PublicKey: key(3)},                          // goes
		{PublicKey: key(4), PresharedKey: key(9)},    // stays, file sets a new psk
		{PublicKey: key(5), PersistentKeepalive: 10}, // goes
		{PublicKey: key(6), PresharedKey: key(9)},    // stays, its second section sets the psk
		{PublicKey: key(7)},                          // stays, nothing to clear
	}}
	want := parseConf(t, "[Interface]\nPrivateKey="+b64(1)+"\n"+
		"[Peer]\nPublicKey="+b64(2)+"\n"+
		"[Peer]\nPublicKey="+b64(4)+"\nPresharedKey="+b64(8)+"\n"+
		"[Peer]\nPublicKey="+b64(6)+"\n"+
		"[Peer]\nPublicKey="+b64(6)+"\nPresharedKey="+b64(8)+"\n"+
		"[Peer]\nPublicKey="+b64(7)+"\n")
	orig := fmt.Sprintf("%+v", want)
	got := ipc.SyncConfig(cur, want)
	if fmt.Sprintf("%+v", want) != orig {
		t.Fatal("SyncConfig modified its input")
	}
	if got.ReplacePeers || got.PrivateKey == nil || *got.PrivateKey != noise.PrivateKey(key(1)) {
		t.Fatalf("interface part: %+v", got)
	}
	var removed []byte
	byKey := map[byte][]device.PeerConfig{}
	for _, pc := range got.Peers {
		if pc.Remove {
			removed = append(removed, pc.PublicKey[0])
			continue
		}
		byKey[pc.PublicKey[0]] = append(byKey[pc.PublicKey[0]], pc)
	}
	if string(removed) != "\x03\x05" {
		t.Errorf("removed %v, want peers 3 and 5", removed)
	}
	if p := byKey[2][0]; p.PresharedKey == nil || !p.PresharedKey.IsZero() || p.PersistentKeepalive == nil || *p.PersistentKeepalive != 0 {
		t.Errorf("peer 2 should have psk and keepalive cleared: %+v", p)
	}
	if p := byKey[4][0]; *p.PresharedKey != noise.PresharedKey(key(8)) {
		t.Errorf("peer 4 psk: %+v", p)
	}
	if p := byKey[6]; len(p) != 2 || p[0].PresharedKey != nil || *p[1].PresharedKey != noise.PresharedKey(key(8)) {
		t.Errorf("peer 6: %+v", p)
	}
	if p := byKey[7][0]; p.PresharedKey != nil || p.PersistentKeepalive != nil {
		t.Errorf("peer 7: %+v", p)
	}
	// With no peers on either side, syncconf is setconf.
	if got := ipc.SyncConfig(device.Status{}, want); !got.ReplacePeers {
		t.Error("no current peers: want replace_peers")
	}
}

// ParseConfigFile keeps the Endpoint of a peer as written when it
// names a host, so that the caller can follow the name; literal addresses
// are not names.
func TestParseConfigFileNames(t *testing.T) {
	text := "[Interface]\nPrivateKey = " + b64(1) + "\n" +
		"[Peer]\nPublicKey = " + b64(2) + "\nEndpoint = vpn.example:51820\n" +
		"[Peer]\nPublicKey = " + b64(3) + "\nEndpoint = 192.0.2.7:51820\n" +
		"[Peer]\nPublicKey = " + b64(4) + "\nEndpoint = [2001:db8::1]:51820\n" +
		"[Peer]\nPublicKey = " + b64(5) + "\n"
	resolve := func(host string) ([]netip.Addr, error) {
		if host != "vpn.example" {
			t.Errorf("resolved %q", host)
		}
		return []netip.Addr{netip.MustParseAddr("198.51.100.1")}, nil
	}
	cfg, names, err := ipc.ParseConfigFile(strings.NewReader(text), "wg0.conf", resolve)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[key(2)] != "vpn.example:51820" {
		t.Fatalf("names %v", names)
	}
	if ep := cfg.Peers[0].Endpoint; ep == nil || *ep != netip.MustParseAddrPort("198.51.100.1:51820") {
		t.Fatalf("the name's address was not applied: %v", ep)
	}
}
