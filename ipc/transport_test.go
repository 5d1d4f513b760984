package ipc

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
)

func TestStreamKeysUAPI(t *testing.T) {
	pub := strings.Repeat("02", 32)
	cfg, err := ParseSet(strings.NewReader("fips_tcp_listen=on\npublic_key="+pub+
		"\nfips_transport=tcp\nendpoint=192.0.2.1:443\n\n"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StreamListen == nil || *cfg.StreamListen != (device.StreamListen{On: true}) {
		t.Fatalf("listener %+v", cfg.StreamListen)
	}
	if tr := cfg.Peers[0].Transport; tr == nil || *tr != conn.TransportTCP {
		t.Fatalf("transport %v", tr)
	}
	var b bytes.Buffer
	if err := WriteSet(&b, cfg); err != nil {
		t.Fatal(err)
	}
	back, err := ParseSet(&b, 0)
	if err != nil || !reflect.DeepEqual(back, cfg) {
		t.Fatalf("WriteSet round trip: %v\n%+v\n%+v", err, back, cfg)
	}
	for _, bad := range []string{"fips_tcp_listen=0", "fips_tcp_listen=65536", "fips_tcp_listen=yes",
		"public_key=" + pub + "\nfips_transport=quic", "public_key=" + pub + "\nfips_transport="} {
		if _, err := ParseSet(strings.NewReader(bad+"\n\n"), 0); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestStreamKeysGet(t *testing.T) {
	ps := device.PeerStatus{Endpoint: netip.MustParseAddrPort("192.0.2.1:443"), ProtocolVersion: 1}
	var plain bytes.Buffer
	WriteGet(&plain, device.Status{ListenPort: 1, Peers: []device.PeerStatus{ps}})
	if strings.Contains(plain.String(), "fips_") {
		t.Fatalf("a UDP-only status has fips keys:\n%s", plain.String())
	}
	ps.Transport = conn.TransportTCP
	st := device.Status{ListenPort: 1, StreamListen: device.StreamListen{On: true, Port: 443}, Peers: []device.PeerStatus{ps}}
	var out bytes.Buffer
	WriteGet(&out, st)
	writeErrno(&out, 0)
	for _, line := range []string{"fips_tcp_listen=443\n", "fips_transport=tcp\n"} {
		if !strings.Contains(out.String(), line) {
			t.Fatalf("no %q in\n%s", line, out.String())
		}
	}
	var g getParser
	if err := readReply(newLineReader(&out, MaxReply), g.kv); err != nil {
		t.Fatal(err)
	}
	got := g.finish()
	if got.StreamListen != st.StreamListen || got.Peers[0].Transport != conn.TransportTCP {
		t.Fatalf("parsed back %+v", got)
	}
}

func TestStreamKeysConfigFile(t *testing.T) {
	conf := "[Interface]\nPrivateKey = " + strings.Repeat("A", 43) + "=\nListenPort = 51820\nTCPListen = on\n\n" +
		"[Peer]\nPublicKey = " + strings.Repeat("B", 43) + "=\nEndpoint = 192.0.2.1:443\nTransport = tcp\nAllowedIPs = 10.0.0.2/32\n"
	cfg, _, err := ParseConfigFile(strings.NewReader(conf), "wg0.conf", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.StreamListen != (device.StreamListen{On: true}) || *cfg.Peers[0].Transport != conn.TransportTCP {
		t.Fatalf("parsed %+v %v", cfg.StreamListen, cfg.Peers[0].Transport)
	}
	st := device.Status{ListenPort: 51820, StreamListen: *cfg.StreamListen,
		Peers: []device.PeerStatus{{PublicKey: cfg.Peers[0].PublicKey, Endpoint: *cfg.Peers[0].Endpoint, Transport: conn.TransportTCP}}}
	out := FormatConfig(st)
	for _, line := range []string{"TCPListen = on\n", "Transport = tcp\n"} {
		if !strings.Contains(out, line) {
			t.Fatalf("no %q in\n%s", line, out)
		}
	}
	if _, _, err := ParseConfigFile(strings.NewReader("[Peer]\nPublicKey = "+strings.Repeat("B", 43)+"=\nTransport = udp4\n"), "x", nil); err == nil {
		t.Fatal("Transport = udp4 accepted")
	}
}

func TestStreamKeysSetArgs(t *testing.T) {
	cfg, err := ParseSetArgs(strings.Fields("tcp-listen 443 peer "+strings.Repeat("B", 43)+"= transport tcp"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.StreamListen != (device.StreamListen{On: true, Port: 443}) || *cfg.Peers[0].Transport != conn.TransportTCP {
		t.Fatalf("parsed %+v %v", cfg.StreamListen, cfg.Peers[0].Transport)
	}
	if _, err := ParseSetArgs(strings.Fields("transport tcp"), nil, nil); err == nil {
		t.Fatal("a peer argument before any peer was accepted")
	}
}

// The TLS keys: fips_tls_sni round-trips through set and get, and a config
// file whose Endpoint names a host sends that host as SNI by default.
func TestTLSKeys(t *testing.T) {
	pub := strings.Repeat("02", 32)
	cfg, err := ParseSet(strings.NewReader("public_key="+pub+
		"\nfips_transport=tls\nfips_tls_sni=www.example.com\nendpoint=192.0.2.1:443\n\n"), 0)
	if err != nil {
		t.Fatal(err)
	}
	pc := cfg.Peers[0]
	if pc.Transport == nil || *pc.Transport != conn.TransportTLS || pc.TLSServerName == nil || *pc.TLSServerName != "www.example.com" {
		t.Fatalf("peer %+v", pc)
	}
	var b bytes.Buffer
	if err := WriteSet(&b, cfg); err != nil {
		t.Fatal(err)
	}
	if back, err := ParseSet(&b, 0); err != nil || !reflect.DeepEqual(back, cfg) {
		t.Fatalf("WriteSet round trip: %v\n%+v\n%+v", err, back, cfg)
	}
	ps := device.PeerStatus{Endpoint: netip.MustParseAddrPort("192.0.2.1:443"), ProtocolVersion: 1,
		Transport: conn.TransportTLS, TLSServerName: "www.example.com"}
	var out bytes.Buffer
	WriteGet(&out, device.Status{ListenPort: 1, Peers: []device.PeerStatus{ps}})
	for _, line := range []string{"fips_transport=tls\n", "fips_tls_sni=www.example.com\n"} {
		if !strings.Contains(out.String(), line) {
			t.Fatalf("no %q in\n%s", line, out.String())
		}
	}

	resolve := func(host string) ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("192.0.2.7")}, nil }
	file := "[Interface]\nPrivateKey = " + strings.Repeat("A", 43) + "=\n[Peer]\nPublicKey = " + strings.Repeat("A", 42) + "g=\n" +
		"Endpoint = vpn.example.org:443\nTransport = tls\n"
	fc, _, err := ParseConfigFile(strings.NewReader(file), "t.conf", resolve)
	if err != nil {
		t.Fatal(err)
	}
	if n := fc.Peers[0].TLSServerName; n == nil || *n != "vpn.example.org" {
		t.Fatalf("default SNI %v", n)
	}
}

// fips_proxy: parsed strictly, written back, shown in get replies; the
// config file's Proxy key and fips-go set's proxy say the same.
func TestProxyKey(t *testing.T) {
	cfg, err := ParseSet(strings.NewReader("fips_proxy=http://u:p@proxy.example:3128\n\n"), 0)
	if err != nil || cfg.Proxy == nil || *cfg.Proxy != "http://u:p@proxy.example:3128" {
		t.Fatalf("%v %+v", err, cfg)
	}
	var b bytes.Buffer
	if err := WriteSet(&b, cfg); err != nil {
		t.Fatal(err)
	}
	if back, err := ParseSet(&b, 0); err != nil || !reflect.DeepEqual(back, cfg) {
		t.Fatalf("WriteSet round trip: %v\n%+v", err, back)
	}
	for _, bad := range []string{"fips_proxy=socks5://p:1", "fips_proxy=proxy:3128", "fips_proxy=http://p:0"} {
		if _, err := ParseSet(strings.NewReader(bad+"\n\n"), 0); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if cfg, err := ParseSet(strings.NewReader("fips_proxy=\n\n"), 0); err != nil || cfg.Proxy == nil || *cfg.Proxy != "" {
		t.Fatalf("clearing: %v %+v", err, cfg)
	}
	var out bytes.Buffer
	WriteGet(&out, device.Status{ListenPort: 1, Proxy: "http://proxy.example:3128"})
	if !strings.Contains(out.String(), "fips_proxy=http://proxy.example:3128\n") {
		t.Fatalf("get reply:\n%s", out.String())
	}
	set, err := ParseSetArgs([]string{"proxy", "http://10.0.0.1:8080"}, nil, nil)
	if err != nil || set.Proxy == nil || *set.Proxy != "http://10.0.0.1:8080" {
		t.Fatalf("set args: %v %+v", err, set)
	}
	file := "[Interface]\nPrivateKey = " + strings.Repeat("A", 43) + "=\nProxy = http://10.0.0.1:8080\n"
	fc, _, err := ParseConfigFile(strings.NewReader(file), "t.conf", nil)
	if err != nil || fc.Proxy == nil || *fc.Proxy != "http://10.0.0.1:8080" {
		t.Fatalf("config file: %v %+v", err, fc)
	}
}

// A get reply says what an auto peer uses now and how it is configured,
// and a client reads both back.
func TestTransportSettingGet(t *testing.T) {
	ps := device.PeerStatus{Endpoint: netip.MustParseAddrPort("192.0.2.1:443"), ProtocolVersion: 1,
		Transport: conn.TransportUDP, TransportSetting: conn.TransportAuto}
	for _, c := range []struct {
		tr    conn.Transport
		proxy bool
		lines []string
	}{
		{conn.TransportUDP, false, []string{"fips_transport=udp\n", "fips_transport_setting=auto\n"}},
		{conn.TransportTLS, true, []string{"fips_transport=tls\n", "fips_transport_setting=auto\n", "fips_via_proxy=true\n"}},
	} {
		ps.Transport, ps.ViaProxy = c.tr, c.proxy
		var out bytes.Buffer
		WriteGet(&out, device.Status{ListenPort: 1, Peers: []device.PeerStatus{ps}})
		for _, line := range c.lines {
			if !strings.Contains(out.String(), line) {
				t.Fatalf("no %q in\n%s", line, out.String())
			}
		}
		writeErrno(&out, 0)
		var g getParser
		if err := readReply(newLineReader(&out, MaxReply), g.kv); err != nil {
			t.Fatal(err)
		}
		st := g.finish()
		got := st.Peers[0]
		if got.Transport != c.tr || got.TransportSetting != conn.TransportAuto || got.ViaProxy != c.proxy {
			t.Fatalf("read back %v %v %v", got.Transport, got.TransportSetting, got.ViaProxy)
		}
		if !strings.Contains(FormatConfig(st), "Transport = auto\n") {
			t.Fatalf("showconf loses auto:\n%s", FormatConfig(st))
		}
	}
}

// The listener's certificate: base64 PEM in UAPI (set and get, never the
// key in get), file names in a config file and for fips-go set.
func TestTLSCertificateKeys(t *testing.T) {
	// A chain longer than one UAPI line carries.
	certPEM := []byte(strings.Repeat("-----BEGIN CERTIFICATE-----\n"+strings.Repeat("A", 2000)+"\n-----END CERTIFICATE-----\n", 4))
	keyPEM := []byte("-----BEGIN PRIVATE KEY-----\nAQ==\n-----END PRIVATE KEY-----\n")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, certPEM, 0o600)
	os.WriteFile(keyFile, keyPEM, 0o600)
	want := &device.TLSCertificate{CertPEM: certPEM, KeyPEM: keyPEM}

	file := "[Interface]\nPrivateKey = " + strings.Repeat("A", 43) + "=\nTLSCertificate = " + certFile + "\nTLSKey = " + keyFile + "\n"
	fc, _, err := ParseConfigFile(strings.NewReader(file), "t.conf", nil)
	if err != nil || !reflect.DeepEqual(fc.TLSCertificate, want) {
		t.Fatalf("config file: %v %+v", err, fc)
	}
	set, err := ParseSetArgs([]string{"tls-certificate", certFile, "tls-key", keyFile}, nil, os.ReadFile)
	if err != nil || !reflect.DeepEqual(set.TLSCertificate, want) {
		t.Fatalf("set args: %v %+v", err, set)
	}
	var b bytes.Buffer
	if err := WriteSet(&b, fc); err != nil {
		t.Fatal(err)
	}
	back, err := ParseSet(&b, 0)
	if err != nil || !reflect.DeepEqual(back.TLSCertificate, want) {
		t.Fatalf("UAPI round trip: %v %+v", err, back)
	}
	var out bytes.Buffer
	WriteGet(&out, device.Status{ListenPort: 1, TLSCertPEM: certPEM})
	if !strings.Contains(out.String(), "fips_tls_cert=") || strings.Contains(out.String(), "fips_tls_key") {
		t.Fatalf("get reply:\n%s", out.String())
	}
	writeErrno(&out, 0)
	var g getParser
	if err := readReply(newLineReader(&out, MaxReply), g.kv); err != nil || string(g.finish().TLSCertPEM) != string(certPEM) {
		t.Fatalf("get read back: %v", err)
	}
	if _, _, err := ParseConfigFile(strings.NewReader("[Interface]\nTLSCertificate = /dev/zero\n"), "t.conf", nil); err == nil {
		t.Fatal("a device file read as a certificate")
	}
}
