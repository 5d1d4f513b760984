package device

import (
	"errors"
	"fmt"

	"github.com/fips-go/fips-go/device/noise"
)

// ErrTooMany is wrapped by Apply when a request would take the device past
// Options.maxPeers or Options.maxAllowedIPs.
var ErrTooMany = errors.New("device: too many peers or allowed IPs")

// checkLimitsLocked refuses cfg if applying it would leave more peers than
// MaxPeers, or could leave more allowed IPs than MaxAllowedIPs. Peers are
// counted exactly (the request's sections replayed over the current key
// set); allowed IPs by an upper bound: what stays of the table (all of it,
// less what replaced or removed peers held) plus every prefix the request
// inserts. The bound is exact for setconf and syncconf, which replace what
// they send. cfgMu must be held, so nothing else changes the peers
// between this check and the apply.
func (d *Device) checkLimitsLocked(cfg *Config) error {
	own := d.static.Load()
	d.peersMu.RLock()
	defer d.peersMu.RUnlock()
	// present[k] tells, for every key the request names, whether it will
	// exist after the request; keys it does not name keep their state.
	present := make(map[noise.PublicKey]bool, len(cfg.Peers))
	cleared := make(map[noise.PublicKey]bool) // existing peers whose prefixes go
	exists := func(k noise.PublicKey) bool {
		if v, ok := present[k]; ok {
			return v
		}
		return !cfg.ReplacePeers && d.peers[k] != nil
	}
	inserts := 0
	for i := range cfg.Peers {
		pc := &cfg.Peers[i]
		if own != nil && own.Public == pc.PublicKey {
			continue // ignored by applyPeerLocked
		}
		switch {
		case pc.Remove:
			present[pc.PublicKey] = false
			cleared[pc.PublicKey] = true
			continue
		case pc.UpdateOnly && !exists(pc.PublicKey):
			continue
		}
		present[pc.PublicKey] = true
		if pc.ReplaceAllowedIPs {
			cleared[pc.PublicKey] = true
		}
		for _, a := range pc.AllowedIPs {
			if !a.Remove {
				inserts++
			}
		}
	}
	peers := len(d.peers)
	if cfg.ReplacePeers {
		peers = 0
	}
	for k, v := range present {
		was := !cfg.ReplacePeers && d.peers[k] != nil
		switch {
		case v && !was:
			peers++
		case !v && was:
			peers--
		}
	}
	if peers > d.opts.maxPeers {
		return fmt.Errorf("%w: the request would leave %d peers, more than the cap of %d", ErrTooMany, peers, d.opts.maxPeers)
	}
	return d.checkAllowedIPsLocked(cfg, cleared, inserts)
}

// checkAllowedIPsLocked is the allowed-IP half of checkLimitsLocked.
func (d *Device) checkAllowedIPsLocked(cfg *Config, cleared map[noise.PublicKey]bool, inserts int) error {
	d.aipMu.RLock()
	defer d.aipMu.RUnlock()
	kept := d.aip.Len()
	if cfg.ReplacePeers {
		kept = 0
	} else {
		for k := range cleared {
			if p := d.peers[k]; p != nil {
				kept -= len(d.aip.Prefixes(p))
			}
		}
	}
	if total := kept + inserts; total > d.opts.maxAllowedIPs {
		return fmt.Errorf("%w: the request could leave %d allowed IPs, more than the cap of %d", ErrTooMany, total, d.opts.maxAllowedIPs)
	}
	return nil
}
