// Package showfmt writes a device's status as fips-go show and watch print
// it: wg(8)'s pretty, dump and single-field forms, byte for byte, plus
// fips-go's counters, sojourn times and the watch table. It is the CLI's,
// not part of the API; package ipc keeps the protocol and the config format.
package showfmt

import (
	"bufio"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

// ShowOptions tune FormatShow. The zero value works.
type ShowOptions struct {
	// Now is the time handshake ages are measured from (zero: time.Now()).
	Now time.Time
	// Counters appends fips-go's device counters.
	Counters bool
	// ShowKeys prints private and preshared keys instead of "(hidden)", as
	// wg does with WG_HIDE_KEYS=never.
	ShowKeys bool
	// EndpointNames are the host names fips-go follows for some peers
	// (get=fipsnames); each is shown below the peer's endpoint.
	EndpointNames map[noise.PublicKey]string
	// Sandbox is the daemon's get=fipssandbox line, shown under the
	// interface when not empty (fips-go show sets it with Counters).
	Sandbox string
}

// FormatShow writes st the way `wg show IFACE` prints it, without colour:
// the interface, then its peers, most recent handshake first.
func FormatShow(w io.Writer, iface string, st device.Status, opts ShowOptions) error {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "interface: %s\n", iface)
	if !st.PrivateKey.IsZero() {
		fmt.Fprintf(bw, "  public key: %s\n", publicKeyOf(st))
		fmt.Fprintf(bw, "  private key: %s\n", maskedKey(st.PrivateKey.Base64(), opts.ShowKeys))
	}
	if st.ListenPort != 0 {
		fmt.Fprintf(bw, "  listening port: %d\n", st.ListenPort)
	}
	if st.FwMark != 0 {
		fmt.Fprintf(bw, "  fwmark: 0x%x\n", st.FwMark)
	}
	if sl := st.StreamListen; sl.On {
		port := sl.Port
		if port == 0 {
			port = st.ListenPort
		}
		fmt.Fprintf(bw, "  tcp listening port: %d\n", port)
	}
	if st.Proxy != "" {
		fmt.Fprintf(bw, "  proxy: %s\n", redactProxy(st.Proxy))
	}
	if st.TLSCertPEM != nil {
		fmt.Fprintf(bw, "  tls certificate: %s\n", certSummary(st.TLSCertPEM))
	}
	showObfuscation(bw, st.Obfuscation)
	if opts.Sandbox != "" {
		fmt.Fprintf(bw, "  sandbox: %s\n", opts.Sandbox)
	}
	for _, ps := range sortedByHandshake(st.Peers) {
		bw.WriteString("\n")
		showPeer(bw, ps, now, opts)
	}
	if opts.Counters && len(st.Counters) > 0 {
		stages, snaps, counters := sojournStages(st.Counters)
		// Only what happened: a list of zeros hides the one that matters.
		bw.WriteString("\ncounters:\n")
		zero := 0
		for _, c := range counters {
			if c.Value == 0 {
				zero++
				continue
			}
			fmt.Fprintf(bw, "  %s: %d\n", c.Name, c.Value)
		}
		if zero > 0 {
			fmt.Fprintf(bw, "  (%d more, all zero)\n", zero)
		}
		writeSojourn(bw, stages, snaps)
	}
	return bw.Flush()
}

func showPeer(bw *bufio.Writer, ps *device.PeerStatus, now time.Time, opts ShowOptions) {
	fmt.Fprintf(bw, "peer: %s\n", ps.PublicKey.String())
	if !ps.PresharedKey.IsZero() {
		fmt.Fprintf(bw, "  preshared key: %s\n", maskedKey(ps.PresharedKey.Base64(), opts.ShowKeys))
	}
	if ps.Endpoint.IsValid() {
		fmt.Fprintf(bw, "  endpoint: %s\n", ps.Endpoint)
		if line := transportLine(ps); line != "" {
			fmt.Fprintf(bw, "  transport: %s\n", line)
		}
	}
	if name := opts.EndpointNames[ps.PublicKey]; name != "" {
		fmt.Fprintf(bw, "  endpoint name: %s (followed when handshakes fail)\n", name)
	}
	fmt.Fprintf(bw, "  allowed ips: %s\n", joinPrefixes(ps, ", ", "(none)"))
	if !ps.LastHandshake.IsZero() && ps.LastHandshake.Unix() != 0 {
		fmt.Fprintf(bw, "  latest handshake: %s\n", ago(ps.LastHandshake, now))
	}
	if ps.RxBytes != 0 || ps.TxBytes != 0 {
		fmt.Fprintf(bw, "  transfer: %s received, %s sent\n", humanBytes(ps.RxBytes), humanBytes(ps.TxBytes))
	}
	if ps.PersistentKeepalive != 0 {
		fmt.Fprintf(bw, "  persistent keepalive: every %s\n", prettyDuration(uint64(ps.PersistentKeepalive)))
	}
	if opts.Counters && ps.PathMTU > 0 {
		fmt.Fprintf(bw, "  path mtu: %d (%s)\n", ps.PathMTU, pathSource(ps.PathMTUSource))
	}
	switch {
	case !opts.Counters:
	case ps.PathProbesOn:
		bw.WriteString("  path probes: on\n")
	case ps.PathProbes != nil:
		bw.WriteString("  path probes: off (set for this peer)\n")
	}
}

// pathSource says how a peer's path MTU was learned.
func pathSource(s string) string {
	switch s {
	case "kernel":
		return "from the kernel's route"
	case "probe":
		return "confirmed by probes"
	case "tcp":
		return "a floor: full-size TCP segments vanished"
	}
	return s
}

func publicKeyOf(st device.Status) noise.PublicKey {
	if !st.PublicKey.IsZero() {
		return st.PublicKey
	}
	return st.PrivateKey.PublicKey()
}

func maskedKey(k string, show bool) string {
	if show {
		return k
	}
	return "(hidden)"
}

// sortedByHandshake orders peers most recent handshake first and those
// without one last, keeping the given order among equals.
func sortedByHandshake(peers []device.PeerStatus) []*device.PeerStatus {
	out := make([]*device.PeerStatus, len(peers))
	for i := range peers {
		out[i] = &peers[i]
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].LastHandshake, out[j].LastHandshake
		if a.IsZero() != b.IsZero() {
			return b.IsZero()
		}
		return a.After(b)
	})
	return out
}

func joinPrefixes(ps *device.PeerStatus, sep, none string) string {
	if len(ps.AllowedIPs) == 0 {
		return none
	}
	var b []byte
	for i, p := range ps.AllowedIPs {
		if i > 0 {
			b = append(b, sep...)
		}
		b = p.AppendTo(b)
	}
	return string(b)
}

// ago is wg's "1 minute, 3 seconds ago", at one-second resolution.
func ago(t, now time.Time) string {
	ts, ns := t.Unix(), now.Unix()
	switch {
	case ts == ns:
		return "Now"
	case ns < ts:
		return "(System clock wound backward; connection problems may ensue.)"
	}
	return prettyDuration(uint64(ns-ts)) + " ago"
}

// prettyDuration spells out seconds as years (of 365 days), days, hours,
// minutes and seconds, skipping zero parts.
func prettyDuration(left uint64) string {
	units := []struct {
		name string
		secs uint64
	}{{"year", 365 * 24 * 3600}, {"day", 24 * 3600}, {"hour", 3600}, {"minute", 60}, {"second", 1}}
	var parts []string
	for _, u := range units {
		n := left / u.secs
		left %= u.secs
		if n == 0 {
			continue
		}
		s := strconv.FormatUint(n, 10) + " " + u.name
		if n != 1 {
			s += "s"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// humanBytes is wg's transfer figure: bytes below 1 KiB, else two decimals
// of the largest binary unit up to TiB.
func humanBytes(b uint64) string {
	const k = 1024
	switch {
	case b < k:
		return fmt.Sprintf("%d B", b)
	case b < k*k:
		return fmt.Sprintf("%.2f KiB", float64(b)/k)
	case b < k*k*k:
		return fmt.Sprintf("%.2f MiB", float64(b)/(k*k))
	case b < k*k*k*k:
		return fmt.Sprintf("%.2f GiB", float64(b)/(k*k*k))
	}
	return fmt.Sprintf("%.2f TiB", float64(b)/(k*k*k)/k)
}

// FormatDump writes st in the tab-separated form of `wg show IFACE dump`:
// a line "private-key public-key listen-port fwmark", then per peer
// "public-key preshared-key endpoint allowed-ips latest-handshake
// transfer-rx transfer-tx persistent-keepalive", with "(none)" and "off"
// for absent values. With a non-empty iface every line starts with it and
// a tab, as in `wg show all dump`; pass "" for a single interface.
func FormatDump(w io.Writer, iface string, st device.Status) error {
	bw := bufio.NewWriter(w)
	prefix := ""
	if iface != "" {
		prefix = iface + "\t"
	}
	priv, pub := "(none)", "(none)"
	if !st.PrivateKey.IsZero() {
		priv, pub = st.PrivateKey.Base64(), publicKeyOf(st).String()
	}
	fmt.Fprintf(bw, "%s%s\t%s\t%d\t%s\n", prefix, priv, pub, st.ListenPort, offOr(uint64(st.FwMark), true))
	for i := range st.Peers {
		ps := &st.Peers[i]
		psk := "(none)"
		if !ps.PresharedKey.IsZero() {
			psk = ps.PresharedKey.Base64()
		}
		ep := "(none)"
		if ps.Endpoint.IsValid() {
			ep = ps.Endpoint.String()
		}
		fmt.Fprintf(bw, "%s%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", prefix, ps.PublicKey.String(), psk, ep,
			joinPrefixes(ps, ",", "(none)"), handshakeUnix(ps), ps.RxBytes, ps.TxBytes, offOr(uint64(ps.PersistentKeepalive), false))
	}
	return bw.Flush()
}

// offOr prints 0 as "off", other values in decimal or 0x-hex.
func offOr(v uint64, hex bool) string {
	switch {
	case v == 0:
		return "off"
	case hex:
		return "0x" + strconv.FormatUint(v, 16)
	}
	return strconv.FormatUint(v, 10)
}

// certSummary names a PEM certificate's subject and end of validity.
func certSummary(p []byte) string {
	b, _ := pem.Decode(p)
	if b == nil {
		return "(unreadable)"
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return "(unreadable)"
	}
	name := c.Subject.CommonName
	if len(c.DNSNames) > 0 {
		name = c.DNSNames[0]
	}
	return fmt.Sprintf("%s (valid until %s)", name, c.NotAfter.UTC().Format("2006-01-02"))
}

// redactProxy hides a proxy URL's password, as show hides keys.
func redactProxy(p string) string {
	if u, err := url.Parse(p); err == nil {
		return u.Redacted()
	}
	return "(hidden)"
}

// transportLine says how a peer's datagrams travel ("tls via proxy
// (auto)"), or "" for a peer on UDP that was configured so, whose show
// output stays wg's.
func transportLine(ps *device.PeerStatus) string {
	if ps.Transport == conn.TransportUDP && ps.TransportSetting == conn.TransportUDP {
		return ""
	}
	s := ps.Transport.String()
	if ps.ViaProxy {
		s += " via proxy"
	}
	if ps.TransportSetting == conn.TransportAuto {
		s += " (auto)"
	}
	return s
}
