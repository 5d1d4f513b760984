package ipc

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

// DefaultMaxRequest bounds one set request. 10,000 peers with an endpoint and
// two allowed IPs each take about 1.8 MB of UAPI text, so 16 MiB leaves ample
// room without letting a client make the daemon buffer without end.
const DefaultMaxRequest = 16 << 20

// A set request, after the "set=1" line, is a sequence of key=value lines
// ended by an empty line:
//
//	private_key=<64 hex>          device section: before any public_key
//	listen_port=<0..65535>
//	fwmark=<0..4294967295>        0 removes the mark
//	replace_peers=true
//	jc=<n> .. h4=<n>              AmneziaWG obfuscation (see obfsKeys)
//	fips_tcp_listen=off|on|<port> stream listener (see transport.go)
//	public_key=<64 hex>           starts a peer section
//	remove=true                   peer section
//	update_only=true
//	preshared_key=<64 hex>        all zeros removes it
//	endpoint=<a.b.c.d:port | [v6(%zone)]:port>
//	persistent_keepalive_interval=<0..65535>
//	replace_allowed_ips=true
//	allowed_ip=[-]<prefix>        '-' removes that prefix from the peer
//	protocol_version=1
//	fips_transport=udp|tcp        the endpoint's transport (transport.go)
//	fips_path_probes=true|false   path-MTU probes for the peer (pathprobes.go)
//	<empty line>
//
// Lines take effect in order, as in wireguard-go: a repeated key overrides
// the earlier one, replace_allowed_ips drops the allowed_ip lines before it
// in the same section, and remove makes the rest of its section moot. A
// public key may head several sections; the device applies them in order.

// ParseSet reads one set request body (the lines after "set=1", through the
// terminating empty line) and returns it as a Config, or an *Error with the
// errno to report. It validates the whole request before returning, so a
// caller that applies only successful results never applies part of a bad
// request. limit bounds the bytes read (<= 0 means DefaultMaxRequest).
//
// If r is a *bufio.Reader, ParseSet reads nothing past the terminating empty
// line, and after a bad line it still consumes the rest of the request, so
// the next request on a connection starts in the right place. The exceptions
// are a request over limit and a stream that ends early: then the stream is
// unusable and the caller should close it.
func ParseSet(r io.Reader, limit int) (*device.Config, error) {
	cfg, _, err := parseSet(r, limit)
	return cfg, err
}

// parseSet is ParseSet that also reports whether the stream is still in
// sync, that is positioned at the start of the next request.
func parseSet(r io.Reader, limit int) (cfg *device.Config, inSync bool, err error) {
	if limit <= 0 {
		limit = DefaultMaxRequest
	}
	lr := newLineReader(r, int64(limit))
	p := setParser{cur: -1}
	var first *Error
	for {
		line, rerr := lr.next()
		if rerr != nil {
			if errors.Is(rerr, errLineTooLong) {
				if first == nil {
					first = errorf(ErrnoProtocol, "line longer than %d bytes", MaxLine)
				}
				continue
			}
			return nil, false, readError(rerr, first, limit)
		}
		// wireguard-go reads lines with bufio.ScanLines, which drops a
		// carriage return before the newline; so do we.
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) == 0 {
			break
		}
		if first != nil {
			continue // drain the rest of a bad request
		}
		if perr := p.line(line); perr != nil {
			first = perr
		}
	}
	if first != nil {
		return nil, true, first
	}
	p.endSection()
	return &p.cfg, true, nil
}

// readError turns a failure to read the next line into the error to report,
// preferring an earlier validation error since that is the real reason.
func readError(err error, first *Error, limit int) *Error {
	switch {
	case errors.Is(err, errTooLarge):
		return errorf(ErrnoTooBig, "request larger than %d bytes", limit)
	case first != nil:
		return first
	case errors.Is(err, io.EOF), errors.Is(err, errNoNewline):
		return errorf(ErrnoProtocol, "request ended without the terminating empty line")
	}
	return wrapError(ErrnoIO, err, "reading request")
}

type setParser struct {
	cfg device.Config
	cur int // index of the current peer section in cfg.Peers, -1 before any
}

func (p *setParser) line(line []byte) *Error {
	k, v, ok := bytes.Cut(line, []byte{'='})
	if !ok {
		return errorf(ErrnoProtocol, "line %q is not key=value", truncate(line))
	}
	if string(k) == "public_key" {
		key, err := parseHexKey(v)
		if err != nil {
			return wrapError(ErrnoInvalid, err, "public_key")
		}
		p.endSection()
		p.cfg.Peers = append(p.cfg.Peers, device.PeerConfig{PublicKey: key})
		p.cur = len(p.cfg.Peers) - 1
		return nil
	}
	if p.cur < 0 {
		return p.deviceLine(k, v)
	}
	return p.peerLine(&p.cfg.Peers[p.cur], k, v)
}

func (p *setParser) deviceLine(k, v []byte) *Error {
	switch string(k) {
	case "private_key":
		key, err := parseHexKey(v)
		if err != nil {
			return wrapError(ErrnoInvalid, err, "private_key")
		}
		pk := noise.PrivateKey(key)
		p.cfg.PrivateKey = &pk
	case "listen_port":
		n, err := parseDecimal(v, 16)
		if err != nil {
			return wrapError(ErrnoInvalid, err, "listen_port")
		}
		port := uint16(n)
		p.cfg.ListenPort = &port
	case "fwmark":
		n, err := parseDecimal(v, 32)
		if err != nil {
			return wrapError(ErrnoInvalid, err, "fwmark")
		}
		mark := uint32(n)
		p.cfg.FwMark = &mark
	case "replace_peers":
		if err := parseTrue(v); err != nil {
			return wrapError(ErrnoInvalid, err, "replace_peers")
		}
		p.cfg.ReplacePeers = true
	case uapiTCPListen:
		sl, err := parseStreamListen(string(v))
		if err != nil {
			return wrapError(ErrnoInvalid, err, uapiTCPListen)
		}
		p.cfg.StreamListen = &sl
	case uapiProxy:
		px, err := parseProxy(string(v))
		if err != nil {
			return wrapError(ErrnoInvalid, err, uapiProxy)
		}
		p.cfg.Proxy = px
	case uapiTLSCert, uapiTLSKey:
		if err := setTLSBase64(&p.cfg, string(k) == uapiTLSKey, v); err != nil {
			return wrapError(ErrnoInvalid, err, "%s", k)
		}
	default:
		if isObfsKey(string(k)) {
			if err := setObfsKey(&p.cfg, string(k), string(v)); err != nil {
				return wrapError(ErrnoInvalid, err, "%s", k)
			}
			return nil
		}
		return errorf(ErrnoInvalid, "%q is not a device key (peer keys must follow a public_key line)", truncate(k))
	}
	return nil
}

func (p *setParser) peerLine(pc *device.PeerConfig, k, v []byte) *Error {
	var err error
	switch string(k) {
	case "remove":
		err = parseTrue(v)
		pc.Remove = err == nil
	case "update_only":
		err = parseTrue(v)
		pc.UpdateOnly = err == nil
	case "replace_allowed_ips":
		if err = parseTrue(v); err == nil {
			// Earlier allowed_ip lines of this section would be added and
			// then removed again by the replace, as wireguard-go does.
			pc.ReplaceAllowedIPs = true
			pc.AllowedIPs = pc.AllowedIPs[:0]
		}
	case "preshared_key":
		var key [noise.KeySize]byte
		if key, err = parseHexKey(v); err == nil {
			psk := noise.PresharedKey(key)
			pc.PresharedKey = &psk
		}
	case "endpoint":
		var ap netip.AddrPort
		if ap, err = parseUAPIEndpoint(v); err == nil {
			pc.Endpoint = &ap
		}
	case "persistent_keepalive_interval":
		var n uint64
		if n, err = parseDecimal(v, 16); err == nil {
			ka := uint16(n)
			pc.PersistentKeepalive = &ka
		}
	case "allowed_ip":
		var c device.AllowedIPChange
		if c, err = parseUAPIAllowedIP(v); err == nil {
			pc.AllowedIPs = append(pc.AllowedIPs, c)
		}
	case "protocol_version":
		if string(v) != "1" {
			err = fmt.Errorf("unsupported version %q (only 1 exists)", truncate(v))
		} else {
			one := 1
			pc.ProtocolVersion = &one
		}
	case uapiTransport:
		pc.Transport, err = parseTransport(string(v))
	case uapiPathProbes:
		pc.PathProbes, err = parsePathProbes(string(v))
	case uapiTLSSNI:
		name := string(v)
		pc.TLSServerName = &name
	default:
		return errorf(ErrnoInvalid, "%q is not a peer key", truncate(k))
	}
	if err != nil {
		return wrapError(ErrnoInvalid, err, "%s", k)
	}
	return nil
}

// endSection normalizes the finished peer section: a removed peer carries
// nothing else (the device ignores it anyway), and an empty allowed-IP list
// is nil, so that equal requests give equal Configs.
func (p *setParser) endSection() {
	if p.cur < 0 {
		return
	}
	pc := &p.cfg.Peers[p.cur]
	if pc.Remove {
		*pc = device.PeerConfig{PublicKey: pc.PublicKey, Remove: true}
	}
	if len(pc.AllowedIPs) == 0 {
		pc.AllowedIPs = nil
	}
}

func parseTrue(v []byte) error {
	if string(v) != "true" {
		return fmt.Errorf("value %q: the only value allowed is \"true\"", truncate(v))
	}
	return nil
}

// parseDecimal accepts what strconv.ParseUint(s, 10, bits) accepts (which is
// what wireguard-go accepts) without allocating a string per line.
func parseDecimal(v []byte, bits int) (uint64, error) {
	if len(v) == 0 || len(v) > 20 {
		return 0, fmt.Errorf("%q is not a number", truncate(v))
	}
	max := uint64(1)<<bits - 1
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a decimal number", truncate(v))
		}
		d := uint64(c - '0')
		if n > (max-d)/10 {
			return 0, fmt.Errorf("%q is out of range 0..%d", truncate(v), max)
		}
		n = n*10 + d
	}
	return n, nil
}

func parseHexKey(v []byte) ([noise.KeySize]byte, error) {
	var k [noise.KeySize]byte
	if len(v) != 2*noise.KeySize {
		return k, fmt.Errorf("%w: want %d hex characters, got %d", noise.ErrKeyFormat, 2*noise.KeySize, len(v))
	}
	if _, err := hex.Decode(k[:], v); err != nil {
		return [noise.KeySize]byte{}, fmt.Errorf("%w: invalid hex", noise.ErrKeyFormat)
	}
	return k, nil
}

// parseUAPIEndpoint accepts a.b.c.d:port and [v6]:port, as wireguard-go's
// default bind does, and no host names. A zone must look like an interface
// name or index so that it cannot smuggle protocol characters.
func parseUAPIEndpoint(v []byte) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(string(v))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not IP:port or [IPv6]:port", truncate(v))
	}
	if err := checkZone(ap.Addr().Zone()); err != nil {
		return netip.AddrPort{}, err
	}
	return ap, nil
}

func checkZone(z string) error {
	if len(z) > 32 {
		return fmt.Errorf("IPv6 zone %q is too long", truncate([]byte(z)))
	}
	for i := 0; i < len(z); i++ {
		c := z[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("IPv6 zone %q has a character other than letters, digits, '_', '.', '-'", z)
		}
	}
	return nil
}

// parseUAPIAllowedIP parses [-]addr/bits. Host bits are masked off, as
// wireguard-go's trie and the kernel do, so the Config holds what the device
// will actually route.
func parseUAPIAllowedIP(v []byte) (device.AllowedIPChange, error) {
	var c device.AllowedIPChange
	if len(v) > 0 && v[0] == '-' {
		c.Remove = true
		v = v[1:]
	}
	p, err := netip.ParsePrefix(string(v))
	if err != nil {
		return c, fmt.Errorf("%q is not an address/bits prefix", truncate(v))
	}
	c.Prefix = p.Masked()
	return c, nil
}

// truncate keeps error messages about hostile input short.
func truncate(b []byte) string {
	const n = 64
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// WriteSet writes cfg as a set request body (without the "set=1" line, with
// the terminating empty line), in the order wg(8) uses. It returns an error,
// writing nothing, if cfg holds something ParseSet would refuse.
func WriteSet(w io.Writer, cfg *device.Config) error {
	if cfg == nil {
		return errors.New("uapi: nil config")
	}
	if err := validateConfig(cfg); err != nil {
		return err
	}
	var b []byte
	if cfg.PrivateKey != nil {
		b = appendHexKey(b, "private_key", *cfg.PrivateKey)
	}
	if cfg.ListenPort != nil {
		b = appendUint(b, "listen_port", uint64(*cfg.ListenPort))
	}
	if cfg.FwMark != nil {
		b = appendUint(b, "fwmark", uint64(*cfg.FwMark))
	}
	if cfg.Obfuscation != nil && len(cfg.ObfuscationKeys) > 0 {
		b = appendObfsKeys(b, *cfg.Obfuscation, cfg.ObfuscationKeys)
	} else if cfg.Obfuscation != nil {
		b = appendObfs(b, *cfg.Obfuscation, true)
	}
	if cfg.StreamListen != nil {
		b = append(b, uapiTCPListen+"="...)
		b = append(b, formatStreamListen(*cfg.StreamListen)...)
		b = append(b, '\n')
	}
	if cfg.Proxy != nil {
		if _, err := parseProxy(*cfg.Proxy); err != nil {
			return err
		}
		b = append(b, uapiProxy+"="...)
		b = append(b, *cfg.Proxy...)
		b = append(b, '\n')
	}
	b = appendTLSCert(b, cfg.TLSCertificate, true)
	if cfg.ReplacePeers {
		b = append(b, "replace_peers=true\n"...)
	}
	for i := range cfg.Peers {
		b = appendPeerConfig(b, &cfg.Peers[i])
		if len(b) >= 32<<10 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	b = append(b, '\n')
	_, err := w.Write(b)
	return err
}

func appendPeerConfig(b []byte, pc *device.PeerConfig) []byte {
	b = appendHexKey(b, "public_key", pc.PublicKey)
	if pc.Remove {
		return append(b, "remove=true\n"...)
	}
	if pc.UpdateOnly {
		b = append(b, "update_only=true\n"...)
	}
	if pc.ProtocolVersion != nil {
		b = append(b, "protocol_version=1\n"...)
	}
	if pc.PresharedKey != nil {
		b = appendHexKey(b, "preshared_key", *pc.PresharedKey)
	}
	if pc.Transport != nil {
		b = append(b, uapiTransport+"="...)
		b = append(b, pc.Transport.String()...)
		b = append(b, '\n')
	}
	b = appendPathProbes(b, pc.PathProbes)
	if pc.TLSServerName != nil {
		b = append(b, uapiTLSSNI+"="...)
		b = append(b, *pc.TLSServerName...)
		b = append(b, '\n')
	}
	if pc.Endpoint != nil {
		b = append(b, "endpoint="...)
		b = pc.Endpoint.AppendTo(b)
		b = append(b, '\n')
	}
	if pc.PersistentKeepalive != nil {
		b = appendUint(b, "persistent_keepalive_interval", uint64(*pc.PersistentKeepalive))
	}
	if pc.ReplaceAllowedIPs {
		b = append(b, "replace_allowed_ips=true\n"...)
	}
	for _, a := range pc.AllowedIPs {
		b = append(b, "allowed_ip="...)
		if a.Remove {
			b = append(b, '-')
		}
		b = a.Prefix.AppendTo(b)
		b = append(b, '\n')
	}
	return b
}

// validateConfig rejects what cannot be written as a request that means the
// same thing when read back.
func validateConfig(cfg *device.Config) error {
	for i := range cfg.Peers {
		pc := &cfg.Peers[i]
		if pc.Remove {
			continue
		}
		if pc.ProtocolVersion != nil && *pc.ProtocolVersion != 1 {
			return fmt.Errorf("uapi: peer %d: protocol version %d (only 1 exists)", i, *pc.ProtocolVersion)
		}
		if pc.Transport != nil && *pc.Transport > conn.TransportTLS {
			return fmt.Errorf("uapi: peer %d: unknown transport %v", i, *pc.Transport)
		}
		if pc.TLSServerName != nil && strings.ContainsAny(*pc.TLSServerName, "\n") {
			return fmt.Errorf("uapi: peer %d: TLS server name %.64q is not a host name", i, *pc.TLSServerName)
		}
		if pc.Endpoint != nil {
			if !pc.Endpoint.IsValid() {
				return fmt.Errorf("uapi: peer %d: invalid endpoint", i)
			}
			if err := checkZone(pc.Endpoint.Addr().Zone()); err != nil {
				return fmt.Errorf("uapi: peer %d: endpoint: %w", i, err)
			}
		}
		for _, a := range pc.AllowedIPs {
			if !a.Prefix.IsValid() || a.Prefix.Addr().Zone() != "" {
				return fmt.Errorf("uapi: peer %d: invalid allowed IP %v", i, a.Prefix)
			}
		}
	}
	return nil
}

func appendHexKey(b []byte, name string, key [noise.KeySize]byte) []byte {
	b = append(b, name...)
	b = append(b, '=')
	b = hex.AppendEncode(b, key[:])
	return append(b, '\n')
}

func appendUint(b []byte, name string, v uint64) []byte {
	b = append(b, name...)
	b = append(b, '=')
	b = strconv.AppendUint(b, v, 10)
	return append(b, '\n')
}
