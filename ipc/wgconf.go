package ipc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

// MaxConfigFile bounds a configuration file; 10,000 peers take about 1.5 MB.
const MaxConfigFile = 64 << 20

// maxConfigLine bounds one line; an AllowedIPs line may list many prefixes.
const maxConfigLine = 1 << 20

// ConfigError is a configuration file error at a line.
type ConfigError struct {
	File string
	Line int // 0 when the error is about the file as a whole
	Err  error
}

func (e *ConfigError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// ParseConfigFile reads a wg(8) configuration file with `wg setconf`
// semantics: the result replaces the whole configuration, so PrivateKey,
// ListenPort and FwMark are always set (to zero when the file omits them),
// ReplacePeers is true and each peer replaces its allowed IPs. name is used
// in errors, which read "name:line: what was wrong". Host names in Endpoint
// are resolved with resolve (nil: host names are an error).
//
// names holds the peers whose Endpoint names a host rather than an
// address, with that "host:port" as written, so that the caller can follow
// the name when it moves.
//
// Like wg, the parser is strict: the wg-quick keys (Address, DNS, MTU,
// Table, Pre/PostUp, Pre/PostDown, SaveConfig) are errors. Pass a wg-quick
// file through StripQuickConfig first, as `wg-quick strip` does.
func ParseConfigFile(r io.Reader, name string, resolve Resolver) (cfg *device.Config, names map[noise.PublicKey]string, err error) {
	return parseConfig(r, name, resolve, false)
}

// ParseAddConfigFile reads a configuration file with `wg addconf`
// semantics: only what the file states is set, and peers are added to the
// existing ones (each listed peer still replaces its own allowed IPs).
// names is as ParseConfigFile's.
func ParseAddConfigFile(r io.Reader, name string, resolve Resolver) (cfg *device.Config, names map[noise.PublicKey]string, err error) {
	return parseConfig(r, name, resolve, true)
}

type confParser struct {
	name     string
	resolve  Resolver
	cfg      device.Config
	section  int      // 0 none yet, 1 [Interface], 2 [Peer]
	hasKey   []bool   // per peer: PublicKey seen
	names    []string // per peer: Endpoint as written when its host is a name
	peerLine []int    // per peer: line of its [Peer] header
	lineNo   int
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func parseConfig(r io.Reader, name string, resolve Resolver, appendMode bool) (*device.Config, map[noise.PublicKey]string, error) {
	p, err := parseConfigWith(r, name, resolve, appendMode)
	if err != nil {
		return nil, nil, err
	}
	p.defaultServerNames()
	return &p.cfg, p.endpointNames(), nil
}

// defaultServerNames gives a peer that may use TLS and whose Endpoint
// names a host that host as its SNI, unless the file set one.
func (p *confParser) defaultServerNames() {
	for i, n := range p.names {
		pc := &p.cfg.Peers[i]
		if n == "" || pc.TLSServerName != nil || pc.Transport == nil ||
			(*pc.Transport != conn.TransportTLS && *pc.Transport != conn.TransportAuto) {
			continue
		}
		if host, _, err := net.SplitHostPort(n); err == nil {
			pc.TLSServerName = &host
		}
	}
}

func (p *confParser) endpointNames() map[noise.PublicKey]string {
	names := map[noise.PublicKey]string{}
	for i, n := range p.names {
		if n != "" {
			names[p.cfg.Peers[i].PublicKey] = n
		}
	}
	return names
}

func parseConfigWith(r io.Reader, name string, resolve Resolver, appendMode bool) (*confParser, error) {
	p := &confParser{name: name, resolve: resolve}
	cr := &countingReader{r: io.LimitReader(r, MaxConfigFile+1)}
	sc := bufio.NewScanner(cr)
	sc.Buffer(nil, maxConfigLine)
	for sc.Scan() {
		p.lineNo++
		if err := p.line(sc.Text()); err != nil {
			return nil, &ConfigError{File: name, Line: p.lineNo, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line longer than %d bytes", maxConfigLine)
		}
		return nil, &ConfigError{File: name, Line: p.lineNo + 1, Err: err}
	}
	if cr.n > MaxConfigFile {
		return nil, &ConfigError{File: name, Err: fmt.Errorf("file larger than %d bytes", MaxConfigFile)}
	}
	for i, ok := range p.hasKey {
		if !ok {
			return nil, &ConfigError{File: name, Line: p.peerLine[i], Err: errors.New("[Peer] section has no PublicKey")}
		}
	}
	if !appendMode {
		fillSetconf(&p.cfg)
	}
	return p, nil
}

// fillSetconf gives cfg the `wg setconf` meaning: everything not stated is
// reset.
func fillSetconf(cfg *device.Config) {
	cfg.ReplacePeers = true
	if cfg.PrivateKey == nil {
		cfg.PrivateKey = new(noise.PrivateKey)
	}
	if cfg.ListenPort == nil {
		cfg.ListenPort = new(uint16)
	}
	if cfg.FwMark == nil {
		cfg.FwMark = new(uint32)
	}
}

// line handles one line the way wg(8) does: drop the comment, drop every
// space, then a section header or Key=Value with the key matched without
// regard to case.
func (p *confParser) line(raw string) error {
	if i := strings.IndexByte(raw, '#'); i >= 0 {
		raw = raw[:i]
	}
	s := removeSpace(raw)
	if s == "" {
		return nil
	}
	switch {
	case strings.EqualFold(s, "[Interface]"):
		p.section = 1
		return nil
	case strings.EqualFold(s, "[Peer]"):
		p.section = 2
		p.cfg.Peers = append(p.cfg.Peers, device.PeerConfig{ReplaceAllowedIPs: true})
		p.hasKey = append(p.hasKey, false)
		p.names = append(p.names, "")
		p.peerLine = append(p.peerLine, p.lineNo)
		return nil
	}
	key, value, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return fmt.Errorf("line unrecognized: %q", shorten(s))
	}
	if isSignatureKey(key) {
		// Tags are separated by spaces ("<b 0x12> <r 4>"): keep them.
		_, v, _ := strings.Cut(raw, "=")
		value = strings.TrimSpace(v)
	}
	switch p.section {
	case 1:
		return p.interfaceKey(key, value)
	case 2:
		return p.peerKey(key, value)
	}
	return fmt.Errorf("%q appears before any [Interface] or [Peer] section", shorten(key))
}

func (p *confParser) interfaceKey(key, value string) error {
	switch strings.ToLower(key) {
	case "privatekey":
		k, err := parseKeyBase64(value)
		if err != nil {
			return fmt.Errorf("PrivateKey: %w", err)
		}
		pk := noise.PrivateKey(k)
		p.cfg.PrivateKey = &pk
	case "listenport":
		port, err := parsePort(value)
		if err != nil {
			return fmt.Errorf("ListenPort: %w", err)
		}
		p.cfg.ListenPort = &port
	case "fwmark":
		m, err := parseFwMark(value)
		if err != nil {
			return fmt.Errorf("FwMark: %w", err)
		}
		p.cfg.FwMark = &m
	case "tcplisten":
		sl, err := parseStreamListen(value)
		if err != nil {
			return fmt.Errorf("TCPListen: %w", err)
		}
		p.cfg.StreamListen = &sl
	case "proxy":
		px, err := parseProxy(value)
		if err != nil {
			//lint:ignore ST1005 the prefix is the config key, spelled as in wg.conf, like its neighbours
			return fmt.Errorf("Proxy: %w", err)
		}
		p.cfg.Proxy = px
	case "tlscertificate", "tlskey":
		pem, err := readPEMFile(value)
		if err == nil {
			err = setTLSPart(&p.cfg, strings.EqualFold(key, "tlskey"), pem)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	default:
		if strings.EqualFold(key, "HeaderProtectionKey") {
			if err := setObfsKeyBase64(&p.cfg, value); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			return nil
		}
		if k := strings.ToLower(key); isObfsKey(k) && k != "header_protection_key" {
			if err := setObfsKey(&p.cfg, k, value); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			return nil
		}
		if isQuickKey(key) {
			return fmt.Errorf("%s is a wg-quick key, not a wg one (strip wg-quick keys first)", key)
		}
		return fmt.Errorf("unknown [Interface] key %q", shorten(key))
	}
	return nil
}

func (p *confParser) peerKey(key, value string) error {
	i := len(p.cfg.Peers) - 1
	pc := &p.cfg.Peers[i]
	switch strings.ToLower(key) {
	case "publickey":
		k, err := parseKeyBase64(value)
		if err != nil {
			return fmt.Errorf("PublicKey: %w", err)
		}
		pc.PublicKey = k
		p.hasKey[i] = true
	case "presharedkey":
		k, err := parseKeyBase64(value)
		if err != nil {
			return fmt.Errorf("PresharedKey: %w", err)
		}
		psk := noise.PresharedKey(k)
		pc.PresharedKey = &psk
	case "allowedips":
		if err := applyAllowedIPs(pc, value); err != nil {
			return fmt.Errorf("AllowedIPs: %w", err)
		}
	case "endpoint":
		ap, err := parseWGEndpoint(value, p.resolve)
		if err != nil {
			//lint:ignore ST1005 the prefix is the config key, spelled as in wg.conf, like its neighbours
			return fmt.Errorf("Endpoint: %w", err)
		}
		pc.Endpoint = &ap
		if host, _, err := net.SplitHostPort(value); err == nil {
			if _, err := netip.ParseAddr(host); err != nil {
				p.names[i] = value
			}
		}
	case "persistentkeepalive":
		ka, err := parseKeepalive(value)
		if err != nil {
			return fmt.Errorf("PersistentKeepalive: %w", err)
		}
		pc.PersistentKeepalive = &ka
	case "transport":
		t, err := parseTransport(value)
		if err != nil {
			//lint:ignore ST1005 the prefix is the config key, spelled as in wg.conf, like its neighbours
			return fmt.Errorf("Transport: %w", err)
		}
		pc.Transport = t
	case "pathprobes":
		pp, err := parsePathProbes(value)
		if err != nil {
			return fmt.Errorf("PathProbes: %w", err)
		}
		pc.PathProbes = pp
	case "tlsservername":
		pc.TLSServerName = &value
	default:
		return fmt.Errorf("unknown [Peer] key %q", shorten(key))
	}
	return nil
}

// isSignatureKey reports whether key is one of AmneziaWG's I1 to I5.
func isSignatureKey(key string) bool {
	return len(key) == 2 && (key[0] == 'i' || key[0] == 'I') && key[1] >= '1' && key[1] <= '5'
}

// removeSpace drops every ASCII space character, as wg(8) does before it
// looks at a line.
func removeSpace(s string) string {
	if !strings.ContainsAny(s, " \t\n\v\f\r") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\v', '\f', '\r':
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// StripQuickConfig removes the wg-quick(8) keys from the [Interface]
// sections of conf and leaves every other line as it was, which is what
// `wg-quick strip` prints and what `wg setconf` then accepts.
func StripQuickConfig(conf string) string {
	var b strings.Builder
	inInterface := false
	for line := range strings.Lines(conf) {
		s := line
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		s = removeSpace(s)
		if strings.HasPrefix(s, "[") {
			inInterface = strings.EqualFold(s, "[Interface]")
		} else if key, _, ok := strings.Cut(s, "="); ok && inInterface && isQuickKey(key) {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// isQuickKey reports whether key is one of the [Interface] keys of
// wg-quick(8), which wg(8) itself rejects.
func isQuickKey(key string) bool {
	switch strings.ToLower(key) {
	case "address", "dns", "mtu", "table", "preup", "postup", "predown", "postdown", "saveconfig":
		return true
	}
	return false
}

// SyncConfig turns want, a configuration parsed with ParseConfigFile, into
// the change `wg syncconf` makes against the running cur: peers absent from
// want are removed one by one instead of replacing all peers, so the peers
// that stay keep their sessions; a preshared key or keepalive that cur has
// and want does not mention is cleared (as current wireguard-tools does;
// releases before 2026 left them). want is not modified.
func SyncConfig(cur device.Status, want *device.Config) *device.Config {
	out := *want
	out.Peers = append([]device.PeerConfig(nil), want.Peers...)
	if len(want.Peers) == 0 || len(cur.Peers) == 0 {
		return &out // nothing to keep: replacing is the same
	}
	out.ReplacePeers = false
	type state struct{ psk, ka bool } // does any section of want set it
	wanted := make(map[noise.PublicKey]*state, len(want.Peers))
	firstIdx := make(map[noise.PublicKey]int, len(want.Peers))
	for i := range want.Peers {
		pc := &want.Peers[i]
		s := wanted[pc.PublicKey]
		if s == nil {
			s = &state{}
			wanted[pc.PublicKey] = s
			firstIdx[pc.PublicKey] = i
		}
		s.psk = s.psk || pc.PresharedKey != nil
		s.ka = s.ka || pc.PersistentKeepalive != nil
	}
	var removals []device.PeerConfig
	for _, ps := range cur.Peers {
		s, ok := wanted[ps.PublicKey]
		if !ok {
			removals = append(removals, device.PeerConfig{PublicKey: ps.PublicKey, Remove: true})
			continue
		}
		pc := &out.Peers[firstIdx[ps.PublicKey]]
		if !s.psk && !ps.PresharedKey.IsZero() {
			pc.PresharedKey = new(noise.PresharedKey)
		}
		if !s.ka && ps.PersistentKeepalive != 0 {
			pc.PersistentKeepalive = new(uint16)
		}
	}
	out.Peers = append(removals, out.Peers...)
	return &out
}

// FormatConfig renders st in wg's configuration file format, as
// `wg showconf` prints it.
func FormatConfig(st device.Status) string {
	var b strings.Builder
	b.WriteString("[Interface]\n")
	if st.ListenPort != 0 {
		fmt.Fprintf(&b, "ListenPort = %d\n", st.ListenPort)
	}
	if st.FwMark != 0 {
		fmt.Fprintf(&b, "FwMark = 0x%x\n", st.FwMark)
	}
	formatObfs(&b, st.Obfuscation)
	if st.StreamListen.On {
		fmt.Fprintf(&b, "TCPListen = %s\n", formatStreamListen(st.StreamListen))
	}
	if st.Proxy != "" {
		fmt.Fprintf(&b, "Proxy = %s\n", st.Proxy)
	}
	if !st.PrivateKey.IsZero() {
		fmt.Fprintf(&b, "PrivateKey = %s\n", st.PrivateKey.Base64())
	}
	b.WriteString("\n")
	for i, ps := range st.Peers {
		fmt.Fprintf(&b, "[Peer]\nPublicKey = %s\n", ps.PublicKey.String())
		if !ps.PresharedKey.IsZero() {
			fmt.Fprintf(&b, "PresharedKey = %s\n", ps.PresharedKey.Base64())
		}
		if len(ps.AllowedIPs) > 0 {
			b.WriteString("AllowedIPs = ")
			for j, a := range ps.AllowedIPs {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString(a.String())
			}
			b.WriteString("\n")
		}
		if ps.Endpoint.IsValid() {
			fmt.Fprintf(&b, "Endpoint = %s\n", ps.Endpoint.String())
			switch {
			case ps.TransportSetting != conn.TransportUDP:
				fmt.Fprintf(&b, "Transport = %s\n", ps.TransportSetting)
			case ps.Transport != conn.TransportUDP:
				fmt.Fprintf(&b, "Transport = %s\n", ps.Transport)
			}
		}
		if ps.PathProbes != nil {
			fmt.Fprintf(&b, "PathProbes = %t\n", *ps.PathProbes)
		}
		if ps.TLSServerName != "" {
			fmt.Fprintf(&b, "TLSServerName = %s\n", ps.TLSServerName)
		}
		if ps.PersistentKeepalive != 0 {
			b.WriteString("PersistentKeepalive = " + strconv.Itoa(int(ps.PersistentKeepalive)) + "\n")
		}
		if i < len(st.Peers)-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}
