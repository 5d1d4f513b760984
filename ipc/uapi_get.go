package ipc

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

// A get=1 reply lists the device, then each peer, then the status line:
//
//	private_key=<hex>               omitted when no key is set
//	listen_port=<port>
//	fwmark=<mark>                   omitted when 0
//	jc=<n> .. h4=<n>                obfuscation (see obfsKeys), each omitted when 0
//	fips_tcp_listen=on|<port>       stream listener, omitted when off (transport.go)
//	public_key=<hex>                starts a peer
//	preshared_key=<hex>             all zeros when none
//	protocol_version=1
//	endpoint=<ip:port>              omitted when unknown
//	fips_transport=tcp              the endpoint's transport, omitted for UDP
//	fips_path_probes=true|false     the peer's own probe setting, omitted when unset
//	last_handshake_time_sec=<unix seconds, 0 when none>
//	last_handshake_time_nsec=<ns>
//	tx_bytes=<n>
//	rx_bytes=<n>
//	persistent_keepalive_interval=<seconds>
//	allowed_ip=<prefix>             one line per prefix
//	errno=0                         written by the server, not WriteGet
//	<empty line>
//
// fips-go also answers "get=fips", which wg never sends, with one
// counter_NAME=value line per device counter, then, for each peer whose
// path MTU is known or whose path is probed, public_key=HEX, then
// path_mtu=<bytes> and path_mtu_source=<kernel|probe> when known and
// path_probes=true when probed, then errno=0 and an empty line. Clients
// ignore lines they do not know, so either part may grow.

// flushAt is how much reply text is gathered before a write.
const flushAt = 32 << 10

// WriteGet writes st as the key=value lines of a get=1 reply, without the
// errno line and the empty line that end it (the server adds those).
func WriteGet(w io.Writer, st device.Status) error {
	var b []byte
	if !st.PrivateKey.IsZero() {
		b = appendHexKey(b, "private_key", st.PrivateKey)
	}
	b = appendUint(b, "listen_port", uint64(st.ListenPort))
	if st.FwMark != 0 {
		b = appendUint(b, "fwmark", uint64(st.FwMark))
	}
	b = appendObfs(b, st.Obfuscation, false)
	b = appendStreamListen(b, st.StreamListen)
	b = appendProxy(b, st.Proxy)
	if st.TLSCertPEM != nil {
		b = appendTLSCert(b, &device.TLSCertificate{CertPEM: st.TLSCertPEM}, false)
	}
	for i := range st.Peers {
		b = appendPeerStatus(b, &st.Peers[i])
		if len(b) >= flushAt {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	_, err := w.Write(b)
	return err
}

func appendPeerStatus(b []byte, ps *device.PeerStatus) []byte {
	b = appendHexKey(b, "public_key", ps.PublicKey)
	b = appendHexKey(b, "preshared_key", ps.PresharedKey)
	version := ps.ProtocolVersion
	if version == 0 {
		version = 1
	}
	b = appendUint(b, "protocol_version", uint64(version))
	if ps.Endpoint.IsValid() {
		b = append(b, "endpoint="...)
		b = ps.Endpoint.AppendTo(b)
		b = append(b, '\n')
		b = appendTransport(b, ps)
	}
	b = appendPathProbes(b, ps.PathProbes)
	b = appendServerName(b, ps.TLSServerName)
	var sec, nsec int64
	if !ps.LastHandshake.IsZero() {
		sec, nsec = ps.LastHandshake.Unix(), int64(ps.LastHandshake.Nanosecond())
	}
	b = append(b, "last_handshake_time_sec="...)
	b = strconv.AppendInt(b, sec, 10)
	b = append(b, "\nlast_handshake_time_nsec="...)
	b = strconv.AppendInt(b, nsec, 10)
	b = append(b, '\n')
	b = appendUint(b, "tx_bytes", ps.TxBytes)
	b = appendUint(b, "rx_bytes", ps.RxBytes)
	b = appendUint(b, "persistent_keepalive_interval", uint64(ps.PersistentKeepalive))
	for _, p := range ps.AllowedIPs {
		b = append(b, "allowed_ip="...)
		b = p.AppendTo(b)
		b = append(b, '\n')
	}
	return b
}

// WriteCounters writes counters as the counter_NAME=value lines of a
// get=fips reply. A name that could break the line format is an error.
func WriteCounters(w io.Writer, counters []device.Counter) error {
	var b []byte
	for _, c := range counters {
		if !validCounterName(c.Name) {
			return fmt.Errorf("uapi: counter name %q: want letters, digits, '_', '.' or '-'", c.Name)
		}
		b = append(b, "counter_"...)
		b = appendUint(b, c.Name, c.Value)
	}
	_, err := w.Write(b)
	return err
}

// writePeerPaths writes the peers' path MTU lines of a get=fips reply.
func writePeerPaths(w io.Writer, peers []device.PeerStatus) error {
	var b []byte
	for i := range peers {
		ps := &peers[i]
		if !peerReported(ps) {
			continue
		}
		b = appendHexKey(b, "public_key", ps.PublicKey)
		if ps.PathMTU > 0 && validCounterName(ps.PathMTUSource) {
			b = appendUint(b, "path_mtu", uint64(ps.PathMTU))
			b = append(b, "path_mtu_source="...)
			b = append(b, ps.PathMTUSource...)
			b = append(b, '\n')
		}
		if ps.PathProbesOn {
			b = append(b, "path_probes=true\n"...)
		}
		if len(b) >= flushAt {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	_, err := w.Write(b)
	return err
}

func validCounterName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// readReply reads reply lines up to the empty line, calling kv for each line
// but the errno one, and returns the reply's errno as an error. Unknown keys
// are the callback's to ignore, so newer servers keep working with this
// client, as they do with wg.
func readReply(lr *lineReader, kv func(k, v []byte) error) error {
	var errno *int64
	var first error
	for {
		line, err := lr.next()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, errNoNewline) {
				return errorf(ErrnoProtocol, "reply ended early")
			}
			return wrapError(ErrnoProtocol, err, "reading reply")
		}
		if len(line) == 0 {
			break
		}
		if first != nil {
			continue
		}
		k, v, ok := bytes.Cut(line, []byte{'='})
		if !ok {
			first = errorf(ErrnoProtocol, "reply line %q is not key=value", truncate(line))
			continue
		}
		if string(k) == "errno" {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				first = errorf(ErrnoProtocol, "reply errno %q", truncate(v))
				continue
			}
			errno = &n
			continue
		}
		if err := kv(k, v); err != nil {
			first = err
		}
	}
	switch {
	case errno == nil:
		return errorf(ErrnoProtocol, "reply has no errno line")
	case *errno != 0:
		n := normalizeErrno(*errno)
		return &Error{Errno: n, Msg: syscall.Errno(-n).Error()}
	}
	return first
}

// getParser builds a Status from get=1 reply lines.
type getParser struct {
	st  device.Status
	cur *device.PeerStatus
	// hs holds each peer's last_handshake_time_sec and _nsec until finish,
	// so the two lines may come in either order.
	hs [][2]int64
}

func (g *getParser) kv(k, v []byte) error {
	if string(k) == "public_key" {
		key, err := parseHexKey(v)
		if err != nil {
			return wrapError(ErrnoProtocol, err, "reply public_key")
		}
		g.st.Peers = append(g.st.Peers, device.PeerStatus{PublicKey: key})
		g.cur = &g.st.Peers[len(g.st.Peers)-1]
		g.hs = append(g.hs, [2]int64{})
		return nil
	}
	var err error
	if g.cur == nil {
		err = g.deviceKV(k, v)
	} else {
		err = g.peerKV(g.cur, &g.hs[len(g.hs)-1], k, v)
	}
	if err != nil {
		return wrapError(ErrnoProtocol, err, "reply %s", truncate(k))
	}
	return nil
}

func (g *getParser) deviceKV(k, v []byte) error {
	switch string(k) {
	case "private_key":
		key, err := parseHexKey(v)
		if err != nil {
			return err
		}
		g.st.PrivateKey = key
		if !g.st.PrivateKey.IsZero() {
			g.st.PublicKey = g.st.PrivateKey.PublicKey()
		}
	case "listen_port":
		n, err := parseDecimal(v, 16)
		g.st.ListenPort = uint16(n)
		return err
	case "fwmark":
		n, err := parseDecimal(v, 32)
		g.st.FwMark = uint32(n)
		return err
	case uapiTCPListen:
		sl, err := parseStreamListen(string(v))
		g.st.StreamListen = sl
		return err
	case uapiProxy:
		g.st.Proxy = string(v)
	case uapiTLSCert:
		pem, err := base64.StdEncoding.DecodeString(string(v))
		if len(g.st.TLSCertPEM)+len(pem) > maxPEMFile {
			return fmt.Errorf("%s over %d bytes", uapiTLSCert, maxPEMFile)
		}
		g.st.TLSCertPEM = append(g.st.TLSCertPEM, pem...)
		return err
	default:
		if isObfsKey(string(k)) {
			o := &g.st.Obfuscation
			if err := setObfsField(&o, string(k), string(v)); err != nil {
				return err
			}
			clearStandardTypes(o)
			return nil
		}
	}
	return nil
}

func (g *getParser) peerKV(ps *device.PeerStatus, hs *[2]int64, k, v []byte) error {
	var err error
	var n uint64
	switch string(k) {
	case "preshared_key":
		ps.PresharedKey, err = parseHexKey(v)
	case "protocol_version":
		n, err = parseDecimal(v, 31)
		ps.ProtocolVersion = int(n)
	case "endpoint":
		ps.Endpoint, err = netip.ParseAddrPort(string(v))
	case uapiTransport:
		var t *conn.Transport
		if t, err = parseTransport(string(v)); err == nil {
			ps.Transport = *t
		}
	case uapiPathProbes:
		ps.PathProbes, err = parsePathProbes(string(v))
	case uapiTLSSNI:
		ps.TLSServerName = string(v)
	case uapiTransportSetting:
		var t *conn.Transport
		if t, err = parseTransport(string(v)); err == nil {
			ps.TransportSetting = *t
		}
	case uapiViaProxy:
		err = parseTrue(v)
		ps.ViaProxy = err == nil
	case "last_handshake_time_sec":
		n, err = parseDecimal(v, 63)
		hs[0] = int64(n)
	case "last_handshake_time_nsec":
		n, err = parseDecimal(v, 63)
		if err == nil && n >= uint64(time.Second) {
			err = fmt.Errorf("%d ns is a second or more", n)
		}
		hs[1] = int64(n)
	case "tx_bytes":
		ps.TxBytes, err = parseDecimal(v, 64)
	case "rx_bytes":
		ps.RxBytes, err = parseDecimal(v, 64)
	case "persistent_keepalive_interval":
		n, err = parseDecimal(v, 16)
		ps.PersistentKeepalive = uint16(n)
	case "allowed_ip":
		var p netip.Prefix
		if p, err = netip.ParsePrefix(string(v)); err == nil {
			ps.AllowedIPs = append(ps.AllowedIPs, p)
		}
	}
	return err
}

// finish turns the "no handshake" encoding (0 seconds, 0 ns) back into the
// zero time.
func (g *getParser) finish() device.Status {
	for i, hs := range g.hs {
		if hs != [2]int64{} {
			g.st.Peers[i].LastHandshake = time.Unix(hs[0], hs[1])
		}
	}
	return g.st
}

// counterParser collects counter_NAME=value lines of a get=fips reply
// and, when peers is set, the path MTU lines of those peers.
type counterParser struct {
	counters []device.Counter
	peers    map[noise.PublicKey]*device.PeerStatus
	cur      *device.PeerStatus // the peer of the last public_key line
}

func (c *counterParser) kv(k, v []byte) error {
	switch string(k) {
	case "public_key":
		key, err := parseHexKey(v)
		if err != nil {
			return wrapError(ErrnoProtocol, err, "reply public_key")
		}
		c.cur = c.peers[noise.PublicKey(key)]
		return nil
	case "path_mtu":
		n, err := parseDecimal(v, 16)
		if err != nil {
			return wrapError(ErrnoProtocol, err, "reply path_mtu")
		}
		if c.cur != nil {
			c.cur.PathMTU = int(n)
		}
		return nil
	case "path_mtu_source":
		if c.cur != nil && validCounterName(string(v)) {
			c.cur.PathMTUSource = string(v)
		}
		return nil
	case "path_probes":
		if c.cur != nil {
			c.cur.PathProbesOn = string(v) == "true"
		}
		return nil
	}
	name, ok := bytes.CutPrefix(k, []byte("counter_"))
	if !ok {
		return nil
	}
	n, err := parseDecimal(v, 64)
	if err != nil {
		return wrapError(ErrnoProtocol, err, "reply counter %s", truncate(name))
	}
	c.counters = append(c.counters, device.Counter{Name: string(name), Value: n})
	return nil
}
