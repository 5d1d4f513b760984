package device

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/hist"
)

// ErrInvalidConfig is wrapped by Apply errors about the request itself.
var ErrInvalidConfig = errors.New("device: invalid configuration")

// ErrPortInUse is wrapped when the requested listen port cannot be bound.
var ErrPortInUse = errors.New("device: listen port unavailable")

// validate checks a whole Config before any of it is applied.
func validate(cfg *Config) error {
	if err := validateObfuscation(cfg); err != nil {
		return err
	}
	if cfg.Proxy != nil && *cfg.Proxy != "" {
		if _, err := conn.ParseProxy(*cfg.Proxy); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if c := cfg.TLSCertificate; c != nil && (len(c.CertPEM) > 0 || len(c.KeyPEM) > 0) {
		if _, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM); err != nil {
			return fmt.Errorf("%w: TLS certificate: %w", ErrInvalidConfig, err)
		}
	}
	for i := range cfg.Peers {
		pc := &cfg.Peers[i]
		if pc.PublicKey.IsZero() {
			return fmt.Errorf("%w: peer %d has an all-zero public key", ErrInvalidConfig, i)
		}
		if pc.Transport != nil && *pc.Transport > conn.TransportTLS {
			return fmt.Errorf("%w: peer %s: unknown transport %v", ErrInvalidConfig, pc.PublicKey, *pc.Transport)
		}
		if pc.TLSServerName != nil {
			if err := validServerName(*pc.TLSServerName); err != nil {
				return fmt.Errorf("%w: peer %s: %w", ErrInvalidConfig, pc.PublicKey, err)
			}
		}
		if pc.ProtocolVersion != nil && *pc.ProtocolVersion != 1 {
			return fmt.Errorf("%w: peer %s: protocol_version %d is not supported (only 1)", ErrInvalidConfig, pc.PublicKey, *pc.ProtocolVersion)
		}
		if pc.Endpoint != nil && (!pc.Endpoint.IsValid() || pc.Endpoint.Port() == 0 || pc.Endpoint.Addr().IsUnspecified()) {
			return fmt.Errorf("%w: peer %s: endpoint %v is not a usable address", ErrInvalidConfig, pc.PublicKey, *pc.Endpoint)
		}
		for _, a := range pc.AllowedIPs {
			if !a.Prefix.IsValid() {
				return fmt.Errorf("%w: peer %s: invalid allowed IP %v", ErrInvalidConfig, pc.PublicKey, a.Prefix)
			}
		}
	}
	return nil
}

// Apply validates cfg as a whole and then applies all of it, or returns an
// error and changes nothing.
func (d *Device) Apply(cfg *Config) (err error) {
	if err := validate(cfg); err != nil {
		return err
	}
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	if d.stopping() {
		return ErrClosed
	}
	if err := d.checkLimitsLocked(cfg); err != nil {
		return err
	}
	obfsNew, err := d.obfuscationAfter(cfg)
	if err != nil {
		return err
	}
	// The steps that can fail for reasons outside the request (the fwmark,
	// binding the port) go first, and a failure undoes what went before.
	if cfg.FwMark != nil && *cfg.FwMark != d.fwmark {
		if err := d.bind.SetMark(*cfg.FwMark); err != nil {
			// Without its mark, the tunnel's own traffic can loop back
			// into the tunnel: the request fails, as in wireguard-go.
			return fmt.Errorf("device: setting fwmark %d: %w", *cfg.FwMark, err)
		}
		old := d.fwmark
		d.fwmark = *cfg.FwMark
		d.stream.SetMark(d.fwmark)
		defer func() {
			if err != nil {
				d.fwmark = old
				d.bind.SetMark(old)
				d.stream.SetMark(old)
			}
		}()
	}
	if cfg.ListenPort != nil && *cfg.ListenPort != d.listenPort {
		if err := d.rebindLocked(*cfg.ListenPort); err != nil {
			return err
		}
	}
	if cfg.StreamListen != nil && *cfg.StreamListen != d.streamListen {
		if err := d.setStreamListenLocked(*cfg.StreamListen); err != nil {
			return err
		}
	}
	if cfg.PrivateKey != nil {
		d.setPrivateKeyLocked(*cfg.PrivateKey)
	}
	if cfg.Proxy != nil {
		d.setProxyLocked(*cfg.Proxy)
	}
	if cfg.TLSCertificate != nil {
		d.setCertificateLocked(*cfg.TLSCertificate)
	}
	if obfsNew != nil {
		d.setObfuscation(obfsNew)
	}
	if cfg.ReplacePeers {
		d.removeAllPeersLocked()
	}
	now := d.now()
	for i := range cfg.Peers {
		d.applyPeerLocked(&cfg.Peers[i], now)
	}
	d.resumeConfigured()
	return nil
}

// ErrNoSocket is wrapped when a failed rebind could not reopen the old
// port either: the device is left without a UDP socket until a later
// request sets a port that can be bound.
var ErrNoSocket = errors.New("device: no UDP socket")

func (d *Device) rebindLocked(port uint16) error {
	old := d.listenPort
	// Runs last, after the sticky sources are cleared, on whatever bind
	// the device ends up with: Close took the connected sockets along.
	defer d.socks.reconnectAll(d)
	d.bind.Close()
	d.bindWG.Wait()
	if err := d.openBindLocked(port); err != nil {
		if rerr := d.openBindLocked(old); rerr != nil {
			d.listenPort = 0
			return fmt.Errorf("%w: port %d: %w; reopening port %d failed too, so the device has %w: %w",
				ErrPortInUse, port, err, old, ErrNoSocket, rerr)
		}
		return fmt.Errorf("%w: %w", ErrPortInUse, err)
	}
	d.followListenPortLocked()
	// Sticky source addresses belonged to the old sockets.
	d.peersMu.RLock()
	for _, p := range d.peers {
		p.epMu.Lock()
		p.ep.ClearSrc()
		p.epMu.Unlock()
	}
	d.peersMu.RUnlock()
	return nil
}

func (d *Device) setPrivateKeyLocked(k noise.PrivateKey) {
	var static *noise.Static
	var pub noise.PublicKey
	if !k.IsZero() {
		static = noise.NewStatic(k)
		pub = static.Public
	}
	if cur := d.static.Load(); cur != nil && static != nil && cur.Private == static.Private {
		return
	}
	d.static.Store(static)
	if static != nil {
		d.checker.Store(noise.NewCookieChecker(pub, d.opts.Rand))
	} else {
		d.checker.Store(nil)
	}
	d.peersMu.Lock()
	defer d.peersMu.Unlock()
	for key, p := range d.peers {
		if static != nil && key == pub {
			// A peer with our own key can never complete a handshake.
			d.removePeerLocked(p)
			continue
		}
		p.mu.Lock()
		p.zeroKeysLocked()
		p.hs.SetLocal(static)
		p.mu.Unlock()
	}
}

// applyPeerLocked applies one peer section. Turning persistent keepalive on
// makes the timers due at once, so the wheel sends the first keepalive.
func (d *Device) applyPeerLocked(pc *PeerConfig, now time.Time) {
	if s := d.static.Load(); s != nil && s.Public == pc.PublicKey {
		d.opts.Logf("device: ignoring peer with the interface's own public key")
		return
	}
	d.peersMu.Lock()
	p := d.peers[pc.PublicKey]
	if pc.Remove {
		if p != nil {
			d.removePeerLocked(p)
		}
		d.peersMu.Unlock()
		return
	}
	isNew := p == nil
	if isNew {
		if pc.UpdateOnly {
			d.peersMu.Unlock()
			return
		}
		p = d.newPeer(pc.PublicKey)
	}
	d.peersMu.Unlock()
	if isNew {
		// Published only once configured: a handshake that found the peer
		// before its allowed IPs were in place would deliver its first
		// packets into rx_drop_source_not_allowed.
		defer func() {
			d.peersMu.Lock()
			d.peers[pc.PublicKey] = p
			d.peersMu.Unlock()
		}()
	}

	if pc.Transport != nil {
		p.setPeerTransportLocked(*pc.Transport)
	}
	if pc.PathProbes != nil {
		p.setPathProbes(*pc.PathProbes)
	}
	if pc.Endpoint != nil {
		p.setEndpoint(conn.Endpoint{Dst: netip.AddrPortFrom(pc.Endpoint.Addr().Unmap(), pc.Endpoint.Port()), Transport: endpointTransport(p.transport)})
	}
	if pc.TLSServerName != nil || pc.Endpoint != nil {
		p.fileServerNameLocked(pc.TLSServerName)
	}
	p.mu.Lock()
	if pc.PresharedKey != nil {
		p.hs.SetPresharedKey(*pc.PresharedKey)
	}
	if pc.PersistentKeepalive != nil {
		p.keepalive = *pc.PersistentKeepalive
		p.timers.SetPersistentKeepalive(time.Duration(p.keepalive)*time.Second, now)
		p.rescheduleLocked()
	}
	p.mu.Unlock()

	if pc.ReplaceAllowedIPs || len(pc.AllowedIPs) > 0 {
		d.aipMu.Lock()
		if pc.ReplaceAllowedIPs {
			d.aip.RemoveAll(p)
		}
		for _, a := range pc.AllowedIPs {
			if a.Remove {
				d.aip.Remove(a.Prefix, p)
			} else {
				d.aip.Insert(a.Prefix, p)
			}
		}
		d.aipMu.Unlock()
	}
}

func (d *Device) removeAllPeersLocked() {
	d.peersMu.Lock()
	for _, p := range d.peers {
		d.removePeerLocked(p)
	}
	d.peersMu.Unlock()
}

// removePeerLocked forgets p: routes, indices, keys, timers, staged
// packets. Batches already with the workers finish and are sent; nothing
// new is accepted for p. Callers hold peersMu.
func (d *Device) removePeerLocked(p *Peer) {
	delete(d.peers, p.pub)
	// removed first: deliver checks it under aipMu, so no batch of p can
	// find p's routes gone without also finding p removed.
	p.removed.Store(true)
	p.fileServerNameLocked(new(string))
	p.forgetEndpoint()
	d.aipMu.Lock()
	d.aip.RemoveAll(p)
	d.aipMu.Unlock()
	p.mu.Lock()
	p.zeroKeysLocked()
	p.dropStagedLocked()
	p.timers.Stop()
	p.mu.Unlock()
	d.wheel.schedule(p, time.Time{})
}

// Status is a snapshot of the configuration and counters.
func (d *Device) Status() Status {
	d.cfgMu.Lock()
	st := Status{ListenPort: d.listenPort, FwMark: d.fwmark, StreamListen: d.streamListen, Proxy: d.proxy, TLSCertPEM: d.tlsCertPEM}
	d.cfgMu.Unlock()
	st.StreamPort = d.stream.Port()
	if s := d.static.Load(); s != nil {
		st.PrivateKey, st.PublicKey = s.Private, s.Public
	}
	d.peersMu.RLock()
	peers := make([]*Peer, 0, len(d.peers))
	for _, p := range d.peers {
		peers = append(peers, p)
	}
	d.peersMu.RUnlock()
	sort.Slice(peers, func(i, j int) bool {
		return string(peers[i].pub[:]) < string(peers[j].pub[:])
	})
	// The allowed IPs first, under aipMu alone: holding it across 10,000
	// peer locks would stall the data path behind a waiting writer.
	aips := make([][]netip.Prefix, len(peers))
	d.aipMu.RLock()
	for i, p := range peers {
		aips[i] = d.aip.Prefixes(p)
	}
	d.aipMu.RUnlock()
	st.Peers = make([]PeerStatus, 0, len(peers))
	for i, p := range peers {
		st.Peers = append(st.Peers, p.status(aips[i]))
	}
	st.Obfuscation = d.obfuscationStatus()
	st.Counters = d.counterSnapshot()
	return st
}

func (p *Peer) status(aips []netip.Prefix) PeerStatus {
	ps := PeerStatus{
		PublicKey:       p.pub,
		TxBytes:         p.txBytes.Load(),
		RxBytes:         p.rxBytes.Load(),
		AllowedIPs:      aips,
		ProtocolVersion: 1,
		PathProbesOn:    p.probesOn(),
	}
	path, src := p.pathMTU()
	ps.PathMTU, ps.PathMTUSource = path, src.String()
	if m := p.probeMode.Load(); m != probesDefault {
		on := m == probesOn
		ps.PathProbes = &on
	}
	if ep, ok := p.endpoint(); ok {
		ps.Endpoint, ps.Transport = ep.Dst, ep.Transport
		if ep.Transport.IsStream() {
			ps.ViaProxy = p.d.stream.ViaProxy(ep)
		}
	}
	p.mu.Lock()
	ps.PresharedKey = p.hs.PresharedKey()
	ps.LastHandshake = p.lastHSAt
	ps.TLSServerName = p.sni
	ps.TransportSetting = p.transport
	ps.PersistentKeepalive = p.keepalive
	p.mu.Unlock()
	return ps
}

// counterSnapshot is the device's counters followed by the bind's.
func (d *Device) counterSnapshot() []Counter {
	out := d.ctr.snapshot()
	if sb, ok := d.bind.(conn.StatsBind); ok {
		s := sb.Stats()
		out = append(out,
			Counter{"bind_gso_fallbacks", s.GSOFallbacks},
			Counter{"bind_gso_oversize", s.GSOOversize},
			Counter{"bind_gro_fallbacks", s.GROFallbacks},
			Counter{"bind_rx_oversize", s.RxOversize},
			Counter{"bind_rx_shed_stale", s.RxShedStale},
			Counter{"bind_rx_socket_drops", s.RxSocketDrops},
			Counter{"bind_rx_bad_control", s.RxBadControl},
			Counter{"bind_send_errors", s.SendErrors},
			Counter{"bind_sticky_fallbacks", s.StickyFallback},
			Counter{"bind_conn_opened", s.ConnOpened},
			Counter{"bind_conn_closed", s.ConnClosed},
			Counter{"bind_conn_failures", s.ConnFailures},
			Counter{"bind_conn_fallbacks", s.ConnFallbacks},
		)
		out = appendSojourn(out, "rx_socket", hist.Snapshot(s.RxSojourn), s.RxSojournNanos)
	}
	out = append(out, d.streamCounters()...)
	for s := range numStages {
		out = appendSojourn(out, stageNames[s], d.sojourn[s].Snapshot(), d.sojourn[s].SumNanos())
	}
	return out
}

// PeerFor returns the peer whose allowed IPs hold a (the longest prefix
// that does), as the device routes a packet to a: the owner a tunnel
// packet from a must have come from. An IPv4-mapped address is looked up
// as IPv4.
func (d *Device) PeerFor(a netip.Addr) (noise.PublicKey, bool) {
	d.aipMu.RLock()
	defer d.aipMu.RUnlock()
	p, ok := d.aip.Lookup(a.Unmap())
	if !ok {
		return noise.PublicKey{}, false
	}
	return p.pub, true
}
