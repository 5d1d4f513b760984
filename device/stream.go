package device

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/fips-go/fips-go/conn"
)

// StreamListen says whether, and on which TCP port, the device accepts
// peers' datagrams over a stream (conn.Stream) beside UDP.
type StreamListen struct {
	On bool
	// Port is the TCP port; 0 follows the UDP listen port.
	Port uint16
}

// The device's stream transport: a conn.Stream created with the device,
// which listens only when configured and dials only for a peer whose
// endpoint's transport is TCP. Its one receive function feeds the same
// receiver as the UDP sockets; d.send routes each endpoint to its
// transport. Nothing else in the device cares which transport an endpoint
// uses.

func (d *Device) startStream() {
	d.stream = conn.NewStream(conn.StreamOptions{Logf: d.opts.Logf})
	d.readersWG.Add(1)
	go d.receiver(d.stream.ReceiveFunc(), true)
}

// send writes bufs to ep on its transport.
func (d *Device) send(bufs [][]byte, ep conn.Endpoint) error {
	if ep.Transport != conn.TransportUDP {
		return d.stream.Send(bufs, ep)
	}
	return d.bind.Send(bufs, ep)
}

// anyStream reports whether some endpoint of eps is not UDP.
func anyStream(eps []conn.Endpoint) bool {
	for _, ep := range eps {
		if ep.Transport != conn.TransportUDP {
			return true
		}
	}
	return false
}

// setStreamListenLocked applies a StreamListen; cfgMu is held.
func (d *Device) setStreamListenLocked(sl StreamListen) error {
	if !sl.On {
		d.stream.StopListening()
		d.streamListen = sl
		return nil
	}
	port := sl.Port
	if port == 0 {
		port = d.listenPort
	}
	if _, err := d.stream.Listen(port); err != nil {
		return fmt.Errorf("%w: %w", ErrPortInUse, err)
	}
	d.streamListen = sl
	return nil
}

// setProxyLocked makes streams dialed from now on go through the HTTP
// proxy p ("": directly); validate has parsed it. cfgMu is held.
func (d *Device) setProxyLocked(p string) {
	var u *url.URL
	if p != "" {
		u, _ = conn.ParseProxy(p)
	}
	d.stream.SetProxy(u)
	d.proxy = p
}

// setCertificateLocked makes the listener serve c to TLS clients (empty:
// a self-signed certificate); validate has checked it. cfgMu is held.
func (d *Device) setCertificateLocked(c TLSCertificate) {
	if len(c.CertPEM) == 0 && len(c.KeyPEM) == 0 {
		d.stream.SetCertificate(nil)
		d.tlsCertPEM = nil
		return
	}
	cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		return
	}
	d.stream.SetCertificate(&cert)
	d.tlsCertPEM = bytes.Clone(c.CertPEM)
}

// followListenPortLocked moves a stream listener that follows the UDP
// port to the port the bind now has; a failure is logged, not returned:
// UDP works, and the listener keeps its old port.
func (d *Device) followListenPortLocked() {
	if !d.streamListen.On || d.streamListen.Port != 0 {
		return
	}
	if _, err := d.stream.Listen(d.listenPort); err != nil {
		d.opts.Logf("device: stream listener stays on TCP port %d: %v", d.stream.Port(), err)
	}
}

// setPeerTransportLocked records the transport a peer's configured
// endpoint uses and moves its current endpoint to it; cfgMu is held.
func (p *Peer) setPeerTransportLocked(t conn.Transport) {
	p.mu.Lock()
	p.transport = t
	p.mu.Unlock()
	p.fb.set(t == conn.TransportAuto)
	if ep, ok := p.endpoint(); ok && ep.Transport != endpointTransport(t) {
		ep.Transport = endpointTransport(t)
		ep.ClearSrc()
		p.setEndpoint(ep)
	}
}

// fileServerNameLocked tells the Stream the TLS server name for the
// peer's endpoint (sni, when set, replaces the peer's); cfgMu is held.
func (p *Peer) fileServerNameLocked(sni *string) {
	p.mu.Lock()
	if sni != nil {
		p.sni = *sni
	}
	name := p.sni
	p.mu.Unlock()
	if p.sniDst.IsValid() {
		p.d.stream.SetServerName(p.sniDst, "")
		p.sniDst = netip.AddrPort{}
	}
	if ep, ok := p.endpoint(); ok && name != "" && !p.removed.Load() {
		p.d.stream.SetServerName(ep.Dst, name)
		p.sniDst = ep.Dst
	}
}

// validServerName accepts "" or a DNS name as TLS sends it in SNI: not
// an address, at most 253 bytes, labels of letters, digits and hyphens.
func validServerName(s string) error {
	if s == "" {
		return nil
	}
	if _, err := netip.ParseAddr(s); err == nil || len(s) > 253 {
		return fmt.Errorf("TLS server name %.64q is not a host name", s)
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("TLS server name %.64q is not a host name", s)
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("TLS server name %.64q is not a host name", s)
			}
		}
	}
	return nil
}

func (d *Device) streamCounters() []Counter {
	s := d.stream.Stats()
	return []Counter{
		{"stream_conns_accepted", s.ConnsAccepted},
		{"stream_conns_dialed", s.ConnsDialed},
		{"stream_conns_closed", s.ConnsClosed},
		{"stream_conns_rejected", s.ConnsRejected},
		{"stream_tls_accepted", s.TLSAccepted},
		{"stream_tls_limited", s.TLSLimited},
		{"stream_dial_failures", s.DialFailures},
		{"stream_bad_frames", s.BadFrames},
		{"stream_unproven_timeouts", s.UnprovenTimeouts},
		{"stream_unproven_excess", s.UnprovenExcess},
		{"stream_write_timeouts", s.WriteTimeouts},
		{"stream_rx_frames", s.RxFrames},
		{"stream_rx_bytes", s.RxBytes},
		{"stream_rx_oversize", s.RxOversize},
		{"stream_tx_frames", s.TxFrames},
		{"stream_tx_bytes", s.TxBytes},
		{"stream_tls_rx_bytes", s.TLSRxBytes},
		{"stream_tls_tx_bytes", s.TLSTxBytes},
		{"stream_tx_writes", s.TxWrites},
		{"stream_tx_queue_drops", s.TxQueueDrops},
		{"stream_tx_bad", s.TxBad},
		{"stream_tx_no_conn", s.TxNoConn},
	}
}
