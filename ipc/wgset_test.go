package ipc_test

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/ipc"
)

func fakeFiles(name string) ([]byte, error) {
	switch name {
	case "priv":
		return []byte(b64(1) + "\n"), nil
	case "psk":
		return []byte(b64(3)), nil
	case "/dev/null":
		return nil, nil
	case "short":
		return []byte("abc"), nil
	case "trailing":
		return []byte(b64(1) + " x"), nil
	}
	return nil, errors.New("no such file")
}

func TestParseSetArgs(t *testing.T) {
	args := strings.Fields("listen-port 51820 fwmark 0x10 private-key priv " +
		"peer " + b64(2) + " preshared-key psk endpoint test.wireguard.com:1 persistent-keepalive 25 allowed-ips 10.0.0.1/8,fd00::/64 " +
		"peer " + b64(3) + " remove endpoint 1.2.3.4:5 " +
		"peer " + b64(4) + " preshared-key /dev/null persistent-keepalive off allowed-ips +10.9.0.0/16,-10.8.0.0/16")
	args = append(args, "peer", b64(5), "allowed-ips", "")
	got, err := ipc.ParseSetArgs(args, fakeResolve, fakeFiles)
	if err != nil {
		t.Fatal(err)
	}
	want := &device.Config{
		ListenPort: ptr(uint16(51820)),
		FwMark:     ptr(uint32(16)),
		PrivateKey: ptr(noise.PrivateKey(key(1))),
		Peers: []device.PeerConfig{
			{PublicKey: key(2), PresharedKey: ptr(noise.PresharedKey(key(3))), Endpoint: ptr(netip.MustParseAddrPort("192.0.2.7:1")),
				PersistentKeepalive: ptr(uint16(25)), ReplaceAllowedIPs: true,
				AllowedIPs: []device.AllowedIPChange{{Prefix: netip.MustParsePrefix("10.0.0.0/8")}, {Prefix: netip.MustParsePrefix("fd00::/64")}}},
			{PublicKey: key(3), Remove: true},
			{PublicKey: key(4), PresharedKey: ptr(noise.PresharedKey{}), PersistentKeepalive: ptr(uint16(0)),
				AllowedIPs: []device.AllowedIPChange{{Prefix: netip.MustParsePrefix("10.9.0.0/16")}, {Prefix: netip.MustParsePrefix("10.8.0.0/16"), Remove: true}}},
			{PublicKey: key(5), ReplaceAllowedIPs: true},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseSetArgsErrors(t *testing.T) {
	peer := "peer " + b64(2) + " "
	for _, s := range []string{
		"listen-port",
		"listen-port 65536",
		"bogus 1",
		"private-key missing",
		"private-key short",
		"private-key trailing",
		"remove",
		"endpoint 1.2.3.4:5",
		"peer notakey",
		peer + "listen-port 1",
		peer + "private-key priv",
		peer + "endpoint",
		peer + "endpoint 1.2.3.4",
		peer + "persistent-keepalive 70000",
		peer + "allowed-ips 10.0.0.0/33",
		peer + "fwmark 1",
		"fwmark 0x",
	} {
		if _, err := ipc.ParseSetArgs(strings.Fields(s), fakeResolve, fakeFiles); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	if _, err := ipc.ParseSetArgs([]string{"private-key", "priv"}, nil, nil); err == nil {
		t.Error("key file accepted with no readFile")
	}
}
