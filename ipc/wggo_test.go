package ipc_test

import (
	"bufio"
	"bytes"
	"net"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.zx2c4.com/wireguard/conn"
	wgdevice "golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/testkit/ipctest"
	"github.com/fips-go/fips-go/ipc"
)

// wireguardGoDiffers lists the bad requests wireguard-go (the reference
// userspace implementation) does not refuse, or refuses with another errno,
// and why fips-go refuses them anyway.
var wireguardGoDiffers = map[string]string{
	"endpoint zone with bracket":  "fips-go keeps zones to interface-name characters",
	"line too long":               "wireguard-go reads lines of up to 64 KiB and answers -EIO past that",
	"no empty line before EOF":    "wireguard-go applies a request cut short; fips-go applies only complete ones",
	"EOF mid-line":                "wireguard-go applies a request cut short; fips-go applies only complete ones",
	"request over the size limit": "wireguard-go has no size limit",
}

// TestBadRequestsMatchWireguardGo sends every bad request to a wireguard-go
// device (over net.Pipe, in-memory TUN, device down so nothing binds) and
// checks it answers with the errno ipctest expects, apart from the
// documented differences.
func TestBadRequestsMatchWireguardGo(t *testing.T) {
	for _, br := range ipctest.BadRequests {
		t.Run(br.Name, func(t *testing.T) {
			skipWithoutNetAdmin(t, br.Request)
			dev := wgdevice.NewDevice(tuntest.NewChannelTUN().TUN(), conn.NewDefaultBind(), wgdevice.NewLogger(wgdevice.LogLevelSilent, ""))
			defer dev.Close()
			if err := dev.IpcSet(strings.TrimPrefix(ipctest.Seed, "set=1\n")); err != nil {
				t.Fatal(err)
			}
			client, server := net.Pipe()
			go dev.IpcHandle(server)
			defer client.Close()
			go func() {
				client.Write([]byte(br.Request))
				if br.HalfClose {
					client.Close()
				}
			}()
			line, err := bufio.NewReader(client).ReadString('\n')
			got, perr := strconv.ParseInt(strings.TrimPrefix(strings.TrimSuffix(line, "\n"), "errno="), 10, 64)
			why, differs := wireguardGoDiffers[br.Name]
			switch {
			case differs:
				t.Logf("wireguard-go: %q, %v (differs on purpose: %s)", line, err, why)
			case err != nil || perr != nil:
				t.Errorf("wireguard-go reply %q, %v", line, err)
			case got != br.Errno:
				t.Errorf("wireguard-go answers errno %d, ipctest expects %d", got, br.Errno)
			}
		})
	}
}

// wgGoStatus reads a wireguard-go device's state through our client, in a
// canonical order (wireguard-go lists peers in map order).
func wgGoStatus(t *testing.T, dev *wgdevice.Device) device.Status {
	t.Helper()
	client, server := net.Pipe()
	go dev.IpcHandle(server)
	c := ipc.NewClient(client)
	defer c.Close()
	st, err := c.Get()
	if err != nil {
		t.Fatal(err)
	}
	return canonical(st)
}

func canonical(st device.Status) device.Status {
	slices.SortFunc(st.Peers, func(a, b device.PeerStatus) int { return bytes.Compare(a.PublicKey[:], b.PublicKey[:]) })
	for i := range st.Peers {
		slices.SortFunc(st.Peers[i].AllowedIPs, func(a, b netip.Prefix) int {
			return strings.Compare(a.String(), b.String())
		})
		if len(st.Peers[i].AllowedIPs) == 0 {
			st.Peers[i].AllowedIPs = nil
		}
	}
	if len(st.Peers) == 0 {
		st.Peers = nil
	}
	// The tuntest device comes up and binds a port of its own choosing.
	st.ListenPort = 0
	st.Counters = nil
	return st
}

// TestParseSetSemanticsMatchWireguardGo applies tricky but valid requests
// (none that would make the device send anything) to a wireguard-go device
// and, through ParseSet, to mapHandler (which
// applies a Config the way the device is meant to), and compares the
// results: the Config a request parses to must mean what wireguard-go does.
func TestParseSetSemanticsMatchWireguardGo(t *testing.T) {
	k := func(b byte) string { return "public_key=" + hexKey(b) }
	requests := []string{
		k(2) + "\nallowed_ip=10.0.0.0/8\nreplace_allowed_ips=true\nallowed_ip=10.1.0.0/16\nallowed_ip=10.2.3.4/16",
		k(2) + "\nremove=true\n" + k(2) + "\nallowed_ip=10.9.0.0/16\nendpoint=192.0.2.9:9",
		k(2) + "\nupdate_only=true\nendpoint=192.0.2.2:2\n" + k(9) + "\nendpoint=192.0.2.3:3\nupdate_only=true",
		k(2) + "\nallowed_ip=fd00::/64",
		k(2) + "\nallowed_ip=-10.1.0.0/16\nallowed_ip=-fd00::/64",
		"fwmark=3\nfwmark=0\n" + k(2) + "\npersistent_keepalive_interval=0",
		"replace_peers=true\n" + k(7) + "\nallowed_ip=10.7.0.0/16\n" + k(8) + "\nallowed_ip=10.7.0.0/16",
		"private_key=" + hexKey(0) + "\n" + k(8) + "\npreshared_key=" + hexKey(0),
		k(8) + "\nallowed_ip=1.2.3.4/32\nremove=true\nallowed_ip=5.6.7.8/32",
		k(8) + "\nallowed_ip=1.2.3.4/32\n" + k(8) + "\nallowed_ip=1.2.3.5/32\nallowed_ip=-1.2.3.4/32\nprotocol_version=1",
		k(8) + "\nreplace_allowed_ips=true\nreplace_allowed_ips=true\nendpoint=[2001:db8::1]:65535",
		k(10) + "\nupdate_only=true\nremove=true\n" + k(8) + "\nremove=true\nupdate_only=true",
	}
	dev := wgdevice.NewDevice(tuntest.NewChannelTUN().TUN(), conn.NewDefaultBind(), wgdevice.NewLogger(wgdevice.LogLevelSilent, ""))
	defer dev.Close()
	h := &mapHandler{}
	seed := strings.TrimPrefix(ipctest.Seed, "set=1\n")
	if err := dev.IpcSet(seed); err != nil {
		t.Fatal(err)
	}
	h.Apply(mustParseSet(t, seed))
	for _, req := range requests {
		req += "\n\n"
		if needsNetAdmin(req) && os.Geteuid() != 0 {
			t.Logf("skipping %q: wireguard-go needs CAP_NET_ADMIN to set an fwmark", req)
			continue
		}
		if err := dev.IpcSet(req); err != nil {
			t.Fatalf("wireguard-go refused %q: %v", req, err)
		}
		if err := h.Apply(mustParseSet(t, req)); err != nil {
			t.Fatal(err)
		}
		if got, want := canonical(h.Status()), wgGoStatus(t, dev); !reflect.DeepEqual(got, want) {
			t.Fatalf("after %q:\nParseSet+Apply: %+v\nwireguard-go:   %+v", req, got, want)
		}
	}
}

// needsNetAdmin reports whether wireguard-go needs CAP_NET_ADMIN to apply
// req: it sets SO_MARK on its sockets for any fwmark line.
func needsNetAdmin(req string) bool { return strings.Contains(req, "fwmark=") }

// skipWithoutNetAdmin skips a comparison wireguard-go cannot make without
// root (fips-go's own side of these requests is tested without root).
func skipWithoutNetAdmin(t *testing.T, req string) {
	t.Helper()
	if needsNetAdmin(req) && os.Geteuid() != 0 {
		t.Skip("wireguard-go needs CAP_NET_ADMIN to set an fwmark; run as root to compare this request")
	}
}
