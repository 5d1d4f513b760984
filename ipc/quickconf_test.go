package ipc_test

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/ipc"
)

func TestParseQuickConfigFile(t *testing.T) {
	text := `[Interface]
# a wg-quick file as a user writes it
PrivateKey = ` + b64(1) + `
Address = 10.0.0.2/24, fd00::2/64
Address = 10.9.0.1
DNS = 10.0.0.1, example.internal
MTU = 1380
ListenPort = 51820
PostUp = iptables -A FORWARD -i %i -j ACCEPT
Table = off

[Peer]
PublicKey = ` + b64(2) + `
Endpoint = 192.0.2.1:51820
AllowedIPs = 0.0.0.0/0, ::/0
`
	q, err := ipc.ParseQuickConfigFile(strings.NewReader(text), "wg0.conf", fakeResolve)
	if err != nil {
		t.Fatal(err)
	}
	wantAddrs := []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24"), netip.MustParsePrefix("fd00::2/64"), netip.MustParsePrefix("10.9.0.1/32")}
	if !reflect.DeepEqual(q.Addresses, wantAddrs) {
		t.Errorf("Addresses %v, want %v", q.Addresses, wantAddrs)
	}
	if want := []netip.Addr{netip.MustParseAddr("10.0.0.1")}; !reflect.DeepEqual(q.DNS, want) {
		t.Errorf("DNS %v, want %v", q.DNS, want)
	}
	if want := []string{"example.internal"}; !reflect.DeepEqual(q.DNSSearch, want) {
		t.Errorf("DNSSearch %v, want %v", q.DNSSearch, want)
	}
	if q.MTU != 1380 {
		t.Errorf("MTU %d, want 1380", q.MTU)
	}
	if want := []string{"PostUp", "Table"}; !reflect.DeepEqual(q.Ignored, want) {
		t.Errorf("Ignored %v, want %v", q.Ignored, want)
	}
	if q.Config.ListenPort == nil || *q.Config.ListenPort != 51820 {
		t.Errorf("ListenPort %v, want 51820", q.Config.ListenPort)
	}
	if len(q.Config.Peers) != 1 || len(q.Config.Peers[0].AllowedIPs) != 2 {
		t.Errorf("peers %+v, want one with two allowed IPs", q.Config.Peers)
	}
	// The wg part is what `wg-quick strip` would hand to `wg setconf`.
	strict, _, err := ipc.ParseConfigFile(strings.NewReader(ipc.StripQuickConfig(text)), "wg0.conf", fakeResolve)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(strict, q.Config) {
		t.Errorf("wg part %+v differs from the stripped file's %+v", q.Config, strict)
	}
}

// The strict parser keeps wg's behaviour: wg-quick keys are errors there.
func TestParseConfigFileStillStrict(t *testing.T) {
	_, _, err := ipc.ParseConfigFile(strings.NewReader("[Interface]\nAddress = 10.0.0.2/24\n"), "wg0.conf", nil)
	if err == nil || !strings.Contains(err.Error(), "wg-quick key") {
		t.Fatalf("ParseConfigFile accepted Address: %v", err)
	}
}

func TestParseQuickConfigFileErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"[Interface]\nAddress = 10.0.0.300/24\n", "wg0.conf:2: Address"},
		{"[Interface]\nAddress = 0.0.0.0/0\n", "wg0.conf:2: Address"},
		{"[Interface]\nDNS = 10.0.0.1, bad/name\n", "wg0.conf:2: DNS"},
		{"[Interface]\nMTU = 12\n", "wg0.conf:2: MTU"},
		{"[Interface]\nMTU = big\n", "wg0.conf:2: MTU"},
		// Errors in the wg part keep the file's line numbers.
		{"[Interface]\nAddress = 10.0.0.2/24\nDNS = 1.1.1.1\nListenPort = x\n", "wg0.conf:4: ListenPort"},
		// wg-quick keys belong in [Interface] only.
		{"[Interface]\n[Peer]\nPublicKey = " + b64(2) + "\nAddress = 10.0.0.2/24\n", "wg0.conf:4: unknown [Peer] key"},
	} {
		_, err := ipc.ParseQuickConfigFile(strings.NewReader(tc.text), "wg0.conf", nil)
		var ce *ipc.ConfigError
		if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want a *ConfigError containing %q", tc.text, err, tc.want)
		}
	}
}

func FuzzParseQuickConfigFile(f *testing.F) {
	f.Add("[Interface]\nPrivateKey = " + b64(1) + "\nAddress = 10.0.0.2/24, fd00::2/64\nDNS = 10.0.0.1, corp\nMTU = 1420\n\n[Peer]\nPublicKey = " + b64(2) + "\nAllowedIPs = 0.0.0.0/0\nEndpoint = 127.0.0.1:1\n")
	f.Add("[Interface]\nAddress=::ffff:1.2.3.4/120\nDNS=,,\nPostUp=x#y\n")
	f.Fuzz(func(t *testing.T, text string) {
		q, err := ipc.ParseQuickConfigFile(strings.NewReader(text), "f", nil)
		if err != nil {
			var ce *ipc.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			return
		}
		for _, p := range q.Addresses {
			if !p.IsValid() || p.Addr().Is4In6() || p.Addr().IsUnspecified() {
				t.Fatalf("invalid address %v accepted", p)
			}
		}
		for _, a := range q.DNS {
			if !a.IsValid() || a.Is4In6() {
				t.Fatalf("invalid DNS %v accepted", a)
			}
		}
		if q.MTU != 0 && (q.MTU < 68 || q.MTU > 65535) {
			t.Fatalf("MTU %d accepted", q.MTU)
		}
		// The wg part parses alone once the wg-quick keys are stripped.
		if _, _, err := ipc.ParseConfigFile(strings.NewReader(ipc.StripQuickConfig(text)), "f", nil); err != nil {
			t.Fatalf("wg part accepted here, rejected after strip: %v", err)
		}
	})
}
