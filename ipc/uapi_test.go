package ipc_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/ipc"
)

func hexKey(b byte) string { return strings.Repeat(fmt.Sprintf("%02x", b), 32) }

func key(b byte) [32]byte {
	var k [32]byte
	for i := range k {
		k[i] = b
	}
	return k
}

func ptr[T any](v T) *T { return &v }

func mustParseSet(t *testing.T, req string) *device.Config {
	t.Helper()
	cfg, err := ipc.ParseSet(strings.NewReader(req), 0)
	if err != nil {
		t.Fatalf("ParseSet(%q): %v", req, err)
	}
	return cfg
}

func TestParseSetEveryKey(t *testing.T) {
	req := "private_key=" + hexKey(1) + "\n" +
		"listen_port=51820\n" +
		"fwmark=4294967295\n" +
		"replace_peers=true\n" +
		"public_key=" + hexKey(2) + "\n" +
		"protocol_version=1\n" +
		"preshared_key=" + hexKey(3) + "\n" +
		"endpoint=192.0.2.1:51820\n" +
		"persistent_keepalive_interval=65535\n" +
		"replace_allowed_ips=true\n" +
		"allowed_ip=10.0.0.0/8\n" +
		"allowed_ip=-10.1.0.0/16\n" +
		"public_key=" + hexKey(4) + "\n" +
		"update_only=true\n" +
		"endpoint=[fe80::1%eth0]:1\n" +
		"allowed_ip=::/0\n" +
		"public_key=" + hexKey(5) + "\n" +
		"remove=true\n" +
		"\n"
	want := &device.Config{
		PrivateKey:   ptr(noise.PrivateKey(key(1))),
		ListenPort:   ptr(uint16(51820)),
		FwMark:       ptr(uint32(4294967295)),
		ReplacePeers: true,
		Peers: []device.PeerConfig{{
			PublicKey:           key(2),
			ProtocolVersion:     ptr(1),
			PresharedKey:        ptr(noise.PresharedKey(key(3))),
			Endpoint:            ptr(netip.MustParseAddrPort("192.0.2.1:51820")),
			PersistentKeepalive: ptr(uint16(65535)),
			ReplaceAllowedIPs:   true,
			AllowedIPs: []device.AllowedIPChange{
				{Prefix: netip.MustParsePrefix("10.0.0.0/8")},
				{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Remove: true},
			},
		}, {
			PublicKey:  key(4),
			UpdateOnly: true,
			Endpoint:   ptr(netip.MustParseAddrPort("[fe80::1%eth0]:1")),
			AllowedIPs: []device.AllowedIPChange{{Prefix: netip.MustParsePrefix("::/0")}},
		}, {
			PublicKey: key(5),
			Remove:    true,
		}},
	}
	if got := mustParseSet(t, req); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// TestParseSetOrder checks the in-order semantics wireguard-go gives
// repeated and contradictory lines.
func TestParseSetOrder(t *testing.T) {
	peer := "public_key=" + hexKey(2) + "\n"
	tests := []struct {
		name string
		req  string
		want device.Config
	}{
		{"last listen_port wins", "listen_port=1\nlisten_port=2\n\n", device.Config{ListenPort: ptr(uint16(2))}},
		{"fwmark 0 is kept, it removes the mark", "fwmark=0\n\n", device.Config{FwMark: ptr(uint32(0))}},
		{"zero private key is kept, it removes the key", "private_key=" + hexKey(0) + "\n\n",
			device.Config{PrivateKey: ptr(noise.PrivateKey{})}},
		{"replace_allowed_ips drops earlier allowed_ip lines",
			peer + "allowed_ip=10.0.0.0/8\nreplace_allowed_ips=true\nallowed_ip=10.1.0.0/16\n\n",
			device.Config{Peers: []device.PeerConfig{{PublicKey: key(2), ReplaceAllowedIPs: true,
				AllowedIPs: []device.AllowedIPChange{{Prefix: netip.MustParsePrefix("10.1.0.0/16")}}}}}},
		{"remove makes the rest of the section moot",
			peer + "endpoint=1.2.3.4:5\nremove=true\nallowed_ip=10.0.0.0/8\n\n",
			device.Config{Peers: []device.PeerConfig{{PublicKey: key(2), Remove: true}}}},
		{"a key may head several sections, kept in order",
			peer + "remove=true\n" + peer + "allowed_ip=10.0.0.0/8\n\n",
			device.Config{Peers: []device.PeerConfig{{PublicKey: key(2), Remove: true},
				{PublicKey: key(2), AllowedIPs: []device.AllowedIPChange{{Prefix: netip.MustParsePrefix("10.0.0.0/8")}}}}}},
		{"host bits are masked, as the device's trie does",
			peer + "allowed_ip=10.1.2.3/8\nallowed_ip=-fd00::1/64\n\n",
			device.Config{Peers: []device.PeerConfig{{PublicKey: key(2), AllowedIPs: []device.AllowedIPChange{
				{Prefix: netip.MustParsePrefix("10.0.0.0/8")}, {Prefix: netip.MustParsePrefix("fd00::/64"), Remove: true}}}}}},
		{"uppercase hex keys", "public_key=" + strings.ToUpper(hexKey(0xab)) + "\n\n",
			device.Config{Peers: []device.PeerConfig{{PublicKey: key(0xab)}}}},
		{"leading zeros in numbers, as strconv.ParseUint takes them", "listen_port=00080\n\n",
			device.Config{ListenPort: ptr(uint16(80))}},
		{"empty request", "\n", device.Config{}},
		{"CRLF line ends, as wireguard-go accepts them", "listen_port=1\r\nfwmark=2\r\n\r\n",
			device.Config{ListenPort: ptr(uint16(1)), FwMark: ptr(uint32(2))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustParseSet(t, tt.req); !reflect.DeepEqual(*got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

// TestParseSetStaysInStep: after a bad request ParseSet has consumed exactly
// that request, so the next one on the same stream parses.
func TestParseSetStaysInStep(t *testing.T) {
	stream := "listen_port=oops\nfwmark=1\n" + strings.Repeat("x", ipc.MaxLine+10) + "\n\n" +
		"listen_port=7\n\n" + "leftover"
	br := bufio.NewReaderSize(strings.NewReader(stream), 16)
	_, err := ipc.ParseSet(br, 0)
	var ie *ipc.Error
	if !errors.As(err, &ie) || ie.Errno != ipc.ErrnoInvalid {
		t.Fatalf("first request: %v, want errno %d (the first error, not the later long line)", err, ipc.ErrnoInvalid)
	}
	cfg, err := ipc.ParseSet(br, 0)
	if err != nil || cfg.ListenPort == nil || *cfg.ListenPort != 7 {
		t.Fatalf("second request: %+v, %v", cfg, err)
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "leftover" {
		t.Fatalf("ParseSet read past its request: left %q", rest)
	}
}

// countingReader is an endless stream of valid lines that counts what is
// read from it.
type countingReader struct{ n int }

func (c *countingReader) Read(b []byte) (int, error) {
	const line = "allowed_ip=10.0.0.0/8\n"
	for i := range b {
		b[i] = line[(c.n+i)%len(line)]
	}
	c.n += len(b)
	return len(b), nil
}

// TestParseSetLimit: an oversized request is refused with -EMSGSIZE after
// reading little more than the limit, never buffering it whole.
func TestParseSetLimit(t *testing.T) {
	const limit = 100 << 10
	src := &countingReader{}
	r := io.MultiReader(strings.NewReader("public_key="+hexKey(1)+"\n"), src)
	_, err := ipc.ParseSet(r, limit)
	var ie *ipc.Error
	if !errors.As(err, &ie) || ie.Errno != ipc.ErrnoTooBig {
		t.Fatalf("err = %v, want errno %d", err, ipc.ErrnoTooBig)
	}
	if src.n > limit+2*ipc.MaxLine {
		t.Fatalf("read %d bytes for a %d-byte limit", src.n, limit)
	}
	// Exactly at the limit is fine.
	req := "listen_port=1\n\n"
	if _, err := ipc.ParseSet(strings.NewReader(req), len(req)); err != nil {
		t.Fatalf("request of exactly the limit: %v", err)
	}
	if _, err := ipc.ParseSet(strings.NewReader(req), len(req)-1); !errors.Is(err, syscall.EMSGSIZE) {
		t.Fatalf("request one byte over the limit: %v", err)
	}
}

func TestParseSetReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("listen_port=1\n"), errReader{boom})
	_, err := ipc.ParseSet(r, 0)
	if !errors.Is(err, boom) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("err = %v, want -EIO wrapping the read error", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func sampleConfig() *device.Config {
	return &device.Config{
		PrivateKey:   ptr(noise.PrivateKey(key(1))),
		ListenPort:   ptr(uint16(0)),
		FwMark:       ptr(uint32(7)),
		ReplacePeers: true,
		Peers: []device.PeerConfig{
			{PublicKey: key(2), Remove: true},
			{
				PublicKey:           key(3),
				UpdateOnly:          true,
				ProtocolVersion:     ptr(1),
				PresharedKey:        ptr(noise.PresharedKey{}),
				Endpoint:            ptr(netip.MustParseAddrPort("[2001:db8::1]:65535")),
				PersistentKeepalive: ptr(uint16(25)),
				ReplaceAllowedIPs:   true,
				AllowedIPs: []device.AllowedIPChange{
					{Prefix: netip.MustParsePrefix("0.0.0.0/0")},
					{Prefix: netip.MustParsePrefix("::ffff:10.0.0.0/104"), Remove: true},
				},
			},
			{PublicKey: key(4)},
		},
	}
}

func TestWriteSetRoundTrip(t *testing.T) {
	for _, cfg := range []*device.Config{sampleConfig(), {}} {
		var b bytes.Buffer
		if err := ipc.WriteSet(&b, cfg); err != nil {
			t.Fatal(err)
		}
		got, err := ipc.ParseSet(&b, 0)
		if err != nil {
			t.Fatalf("ParseSet(WriteSet(x)): %v\n%s", err, b.String())
		}
		if !reflect.DeepEqual(got, cfg) {
			t.Fatalf("round trip:\ngot  %+v\nwant %+v", got, cfg)
		}
	}
}

func TestWriteSetRefusesInvalid(t *testing.T) {
	bad := []func(c *device.Config){
		func(c *device.Config) { c.Peers[1].ProtocolVersion = ptr(2) },
		func(c *device.Config) { c.Peers[1].Endpoint = ptr(netip.AddrPort{}) },
		func(c *device.Config) { c.Peers[1].Endpoint = ptr(netip.MustParseAddrPort("[fe80::1%a]b]:1")) },
		func(c *device.Config) { c.Peers[1].AllowedIPs[0].Prefix = netip.Prefix{} },
	}
	for i, mutate := range bad {
		cfg := sampleConfig()
		mutate(cfg)
		var b bytes.Buffer
		if err := ipc.WriteSet(&b, cfg); err == nil || b.Len() != 0 {
			t.Errorf("case %d: err %v, wrote %d bytes; want an error and nothing written", i, err, b.Len())
		}
	}
	if err := ipc.WriteSet(io.Discard, nil); err == nil {
		t.Error("WriteSet(nil) succeeded")
	}
}

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

func TestWriteGetFormat(t *testing.T) {
	want := "private_key=" + hexKey(1) + "\n" +
		"listen_port=51820\n" +
		"fwmark=32\n" +
		"public_key=" + hexKey(2) + "\n" +
		"preshared_key=" + hexKey(3) + "\n" +
		"protocol_version=1\n" +
		"endpoint=192.0.2.1:51820\n" +
		"last_handshake_time_sec=1700000000\n" +
		"last_handshake_time_nsec=123456789\n" +
		"tx_bytes=1099511627776\n" +
		"rx_bytes=12345\n" +
		"persistent_keepalive_interval=25\n" +
		"allowed_ip=10.0.0.0/8\n" +
		"allowed_ip=fd00::/64\n" +
		"public_key=" + hexKey(4) + "\n" +
		"preshared_key=" + hexKey(0) + "\n" +
		"protocol_version=1\n" +
		"last_handshake_time_sec=0\n" +
		"last_handshake_time_nsec=0\n" +
		"tx_bytes=0\n" +
		"rx_bytes=0\n" +
		"persistent_keepalive_interval=0\n"
	var b bytes.Buffer
	if err := ipc.WriteGet(&b, sampleStatus()); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	// An empty device: no private key, no fwmark, but the port.
	b.Reset()
	if err := ipc.WriteGet(&b, device.Status{}); err != nil || b.String() != "listen_port=0\n" {
		t.Fatalf("empty status: %q, %v", b.String(), err)
	}
}

func TestWriteCountersRefusesBadNames(t *testing.T) {
	for _, name := range []string{"", "a=b", "a\nb", "a b", strings.Repeat("a", 200)} {
		if err := ipc.WriteCounters(io.Discard, []device.Counter{{Name: name}}); err == nil {
			t.Errorf("counter name %q accepted", name)
		}
	}
}

func TestErrnoOf(t *testing.T) {
	tests := []struct {
		err  error
		want int64
	}{
		{nil, 0},
		{errors.New("nope"), ipc.ErrnoInvalid},
		{fmt.Errorf("bind: %w", syscall.EADDRINUSE), ipc.ErrnoAddrInUse},
		{&ipc.Error{Errno: -5, Msg: "io"}, -5},
		{&ipc.Error{Errno: 5, Msg: "positive is normalized"}, -5},
		{&ipc.Error{Errno: 0, Msg: "an error is never success"}, ipc.ErrnoInvalid},
		{fmt.Errorf("wrapped: %w", &ipc.Error{Errno: ipc.ErrnoProtocol}), ipc.ErrnoProtocol},
	}
	for _, tt := range tests {
		if got := ipc.ErrnoOf(tt.err); got != tt.want {
			t.Errorf("ErrnoOf(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	err := error(&ipc.Error{Errno: ipc.ErrnoAddrInUse, Msg: "port"})
	if !errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EINVAL) {
		t.Error("errors.Is does not match the errno")
	}
}
