package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// conf is a parsed wg config file: sections in order, each a map from key to
// value; list values (AllowedIPs) are normalised to a sorted, comma-joined
// form so that order does not matter.
type conf []map[string]string

func parseConf(t *testing.T, s string) conf {
	t.Helper()
	var c conf
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			c = append(c, map[string]string{"": line})
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || len(c) == 0 {
				t.Fatalf("bad config line %q in\n%s", line, s)
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if k == "AllowedIPs" {
				parts := strings.Split(v, ",")
				for i := range parts {
					parts[i] = strings.TrimSpace(parts[i])
				}
				if old, ok := c[len(c)-1][k]; ok {
					parts = append(parts, strings.Split(old, ",")...)
				}
				sort.Strings(parts)
				v = strings.Join(parts, ",")
			}
			c[len(c)-1][k] = v
		}
	}
	return c
}

// peersByKey indexes the [Peer] sections by PublicKey.
func (c conf) peersByKey() map[string]map[string]string {
	m := map[string]map[string]string{}
	for _, s := range c {
		if s[""] == "[Peer]" {
			m[s["PublicKey"]] = s
		}
	}
	return m
}

func confEqual(t *testing.T, what string, got, want conf) {
	t.Helper()
	if len(got) == 0 || len(want) == 0 || fmt.Sprint(got[0]) != fmt.Sprint(want[0]) {
		t.Errorf("%s: [Interface] is %v, want %v", what, first(got), first(want))
	}
	gp, wp := got.peersByKey(), want.peersByKey()
	if fmt.Sprint(gp) != fmt.Sprint(wp) {
		t.Errorf("%s: peers are\n%v\nwant\n%v", what, gp, wp)
	}
}

func first(c conf) map[string]string {
	if len(c) == 0 {
		return nil
	}
	return c[0]
}

func randKey(t *testing.T) string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// TestWgTools drives fips-go with the stock wg tool: `wg setconf` from a
// file (fwmark, preshared key, two peers, IPv6 endpoint, keepalive), then
// `wg set` changes (replace a peer's allowed IPs, add a peer, remove one);
// `wg showconf` must print exactly the resulting configuration and
// `fips-go showconf` the same. With traffic through the tunnel, `wg show
// IFACE dump`, `wg show all dump` (our interfaces' lines) and `wg show
// IFACE` must print the same as fips-go's own show, and `wg show
// interfaces` must list both interfaces.
func TestWgTools(t *testing.T) {
	requireRoot(t)
	p := newPair(t, pairOpts{})
	a, b := p.a, p.b
	psk := randKey(t)
	pskFile := writeTemp(t, "psk", psk+"\n")
	ghost, extra := newKeyPair(t), newKeyPair(t)
	file := filepath.Join(t.TempDir(), "a.conf")
	writeConf(t, file, fmt.Sprintf(`[Interface]
PrivateKey = %s
ListenPort = %d
FwMark = 0x1234

[Peer]
PublicKey = %s
PresharedKey = %s
AllowedIPs = 10.200.0.2/32, fd10::2/128
Endpoint = %s
PersistentKeepalive = 25

[Peer]
PublicKey = %s
AllowedIPs = 10.77.0.0/16, fd77::/48
Endpoint = [fd00:1::99]:51999
`, a.key.priv, a.port, b.key.pub, psk, svc(p.link.v4B, b.port), ghost.pub))
	a.wg("setconf", a.iface, file)
	// B takes the same preshared key, through fips-go's own client.
	b.fipsctl("set", b.iface, "peer", a.key.pub, "preshared-key", pskFile)

	a.wg("set", a.iface, "peer", ghost.pub, "allowed-ips", "10.78.0.0/16")
	a.wg("set", a.iface, "peer", extra.pub, "endpoint", "10.1.0.77:4000", "allowed-ips", "10.79.1.0/24,fd79::/64",
		"persistent-keepalive", "off")
	a.wg("set", a.iface, "peer", ghost.pub, "remove")
	want := parseConf(t, fmt.Sprintf(`[Interface]
ListenPort = %d
FwMark = 0x1234
PrivateKey = %s

[Peer]
PublicKey = %s
PresharedKey = %s
AllowedIPs = 10.200.0.2/32, fd10::2/128
Endpoint = %s
PersistentKeepalive = 25

[Peer]
PublicKey = %s
AllowedIPs = 10.79.1.0/24, fd79::/64
Endpoint = 10.1.0.77:4000
`, a.port, a.key.priv, b.key.pub, psk, svc(p.link.v4B, b.port), extra.pub))
	wgConf := a.wg("showconf", a.iface)
	confEqual(t, "wg showconf", parseConf(t, wgConf), want)
	fipsConf := a.fipsctl("showconf", a.iface)
	confEqual(t, "fips-go showconf", parseConf(t, fipsConf), want)
	if fipsConf != wgConf {
		t.Errorf("fips-go showconf differs from wg showconf:\n%s\nvs\n%s", fipsConf, wgConf)
	}

	a.ns.waitPing(b.tun4, 20*time.Second)
	a.ns.ping(b.tun6, 5, 500, false, "-i", "0.05")
	compareShow(t, a, "dump", []string{"show", a.iface, "dump"}, []string{"show", a.iface, "dump"})
	compareShow(t, a, "show", []string{"show", a.iface}, []string{"show", "--counters=false", a.iface})
	compareAllDump(t, a, []string{a.iface, b.iface})
	for _, tool := range []string{"wg", "fips-go"} {
		checkInterfacesListed(t, a, tool, a.iface, b.iface)
	}
}

// checkInterfacesListed asserts that `TOOL show interfaces` names each of
// the given interfaces.
func checkInterfacesListed(t *testing.T, n *node, tool string, ifaces ...string) {
	t.Helper()
	out := n.wg("show", "interfaces")
	if tool == "fips-go" {
		out = n.fipsctl("show", "interfaces")
	}
	for _, want := range ifaces {
		if !contains(strings.Fields(out), want) {
			t.Errorf("%s show interfaces does not list %s: %q", tool, want, out)
		}
	}
}

func writeConf(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// handshakeAge matches the one field of wg show that depends on when it runs.
var handshakeAge = regexp.MustCompile(`(?m)^(  latest handshake: ).*$`)

// compareShow runs `wg ARGS` and `fips-go FARGS` and requires the same
// output (the handshake age aside); it retries a few times in case a
// keepalive or handshake lands between the two.
func compareShow(t *testing.T, n *node, what string, wgArgs, fipsArgs []string) {
	t.Helper()
	var w, f string
	for attempt := 0; attempt < 3; attempt++ {
		w = handshakeAge.ReplaceAllString(n.wg(wgArgs...), "${1}AGE")
		f = handshakeAge.ReplaceAllString(n.fipsctl(fipsArgs...), "${1}AGE")
		if w == f {
			return
		}
		time.Sleep(time.Second)
	}
	t.Errorf("wg %s and fips-go %s differ:\n--- wg\n%s\n--- fips-go\n%s", what, what, w, f)
}

// compareAllDump compares `show all dump` from both tools, restricted to
// the lines of our interfaces (other runs may have interfaces of their own).
func compareAllDump(t *testing.T, n *node, ifaces []string) {
	t.Helper()
	filter := func(s string) string {
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			name, _, _ := strings.Cut(l, "\t")
			if contains(ifaces, name) {
				keep = append(keep, l)
			}
		}
		// wg lists interfaces in directory order, fips-go sorted; only the
		// order within an interface is meaningful.
		sort.SliceStable(keep, func(i, j int) bool {
			a, _, _ := strings.Cut(keep[i], "\t")
			b, _, _ := strings.Cut(keep[j], "\t")
			return a < b
		})
		return strings.Join(keep, "\n")
	}
	var w, f string
	for attempt := 0; attempt < 3; attempt++ {
		w, f = filter(n.wg("show", "all", "dump")), filter(n.fipsctl("show", "all", "dump"))
		if w == f && strings.Count(w, "\n") >= 3 {
			return
		}
		time.Sleep(time.Second)
	}
	t.Errorf("wg show all dump and fips-go show all dump differ for %v:\n--- wg\n%s\n--- fips-go\n%s", ifaces, w, f)
}
