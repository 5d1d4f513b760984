package ipc_test

import (
	"bytes"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/ipctest"
	"github.com/fips-go/fips-go/ipc"
)

// mapHandler is a small in-memory stand-in for the device: it applies
// Configs with wireguard-go's semantics, atomically (on a copy, committed at
// the end), so the ipc package can be tested without the real device.
type mapHandler struct {
	mu       sync.Mutex // guards all fields
	st       device.Status
	applyErr error // when set, Apply refuses everything with it
	applied  int
}

func (h *mapHandler) Status() device.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return cloneStatus(h.st)
}

func (h *mapHandler) Apply(cfg *device.Config) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.applyErr != nil {
		return h.applyErr
	}
	st := cloneStatus(h.st)
	if cfg.PrivateKey != nil {
		st.PrivateKey = *cfg.PrivateKey
		st.PublicKey = noise.PublicKey{}
		if !st.PrivateKey.IsZero() {
			st.PublicKey = st.PrivateKey.PublicKey()
		}
	}
	if cfg.ListenPort != nil {
		st.ListenPort = *cfg.ListenPort
	}
	if cfg.FwMark != nil {
		st.FwMark = *cfg.FwMark
	}
	if cfg.Obfuscation != nil {
		st.Obfuscation = *cfg.Obfuscation
	}
	if cfg.ReplacePeers {
		st.Peers = nil
	}
	for i := range cfg.Peers {
		applyPeer(&st, &cfg.Peers[i])
	}
	slices.SortFunc(st.Peers, func(a, b device.PeerStatus) int { return bytes.Compare(a.PublicKey[:], b.PublicKey[:]) })
	h.st = st
	h.applied++
	return nil
}

func applyPeer(st *device.Status, pc *device.PeerConfig) {
	idx := slices.IndexFunc(st.Peers, func(p device.PeerStatus) bool { return p.PublicKey == pc.PublicKey })
	if pc.Remove {
		if idx >= 0 {
			st.Peers = slices.Delete(st.Peers, idx, idx+1)
		}
		return
	}
	if idx < 0 {
		if pc.UpdateOnly {
			return
		}
		st.Peers = append(st.Peers, device.PeerStatus{PublicKey: pc.PublicKey, ProtocolVersion: 1})
		idx = len(st.Peers) - 1
	}
	ps := &st.Peers[idx]
	if pc.PresharedKey != nil {
		ps.PresharedKey = *pc.PresharedKey
	}
	if pc.Endpoint != nil {
		ps.Endpoint = *pc.Endpoint
	}
	if pc.PersistentKeepalive != nil {
		ps.PersistentKeepalive = *pc.PersistentKeepalive
	}
	if pc.ReplaceAllowedIPs {
		ps.AllowedIPs = nil
	}
	for _, c := range pc.AllowedIPs {
		ps.AllowedIPs = slices.DeleteFunc(ps.AllowedIPs, func(p netip.Prefix) bool { return p == c.Prefix })
		if c.Remove {
			continue
		}
		// An allowed IP belongs to one peer: adding it moves it.
		for j := range st.Peers {
			st.Peers[j].AllowedIPs = slices.DeleteFunc(st.Peers[j].AllowedIPs, func(p netip.Prefix) bool { return p == c.Prefix })
		}
		ps.AllowedIPs = append(ps.AllowedIPs, c.Prefix)
	}
}

func cloneStatus(st device.Status) device.Status {
	out := st
	out.Peers = slices.Clone(st.Peers)
	for i := range out.Peers {
		out.Peers[i].AllowedIPs = slices.Clone(st.Peers[i].AllowedIPs)
	}
	out.Counters = slices.Clone(st.Counters)
	return out
}

// TestBadRequestsMapHandler runs the conformance suite against mapHandler,
// which proves the suite (and the parser and server behind it) work; the
// device runs the same suite against the real thing.
func TestBadRequestsMapHandler(t *testing.T) {
	if len(ipctest.BadRequests) < 30 {
		t.Fatalf("only %d bad requests", len(ipctest.BadRequests))
	}
	h := &mapHandler{}
	ipctest.RunBadRequests(t, h)
	st := h.Status()
	if len(st.Peers) != 2 || st.PrivateKey.IsZero() {
		t.Fatalf("seed configuration not in place at the end: %+v", st)
	}
	if h.applied != 1 {
		t.Errorf("Apply called %d times, want once (the seed): a bad request reached the handler", h.applied)
	}
}

var _ ipc.Handler = (*mapHandler)(nil)
