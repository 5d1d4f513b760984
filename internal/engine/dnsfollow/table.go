package dnsfollow

import (
	"errors"
	"maps"
	"sync"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

// MaxNames caps a Table: more names than a device could usefully have
// peers is a client gone wrong.
const MaxNames = 100_000

// ErrTooManyNames is returned by Table.Set beyond MaxNames.
var ErrTooManyNames = errors.New("dnsfollow: too many endpoint names")

// Table is the set of names a daemon follows, shared between the UAPI
// server (which sets them) and Run (which reads them every tick).
type Table struct {
	mu      sync.Mutex // guards names
	names   map[noise.PublicKey]string
	changed chan struct{}
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{names: map[noise.PublicKey]string{}, changed: make(chan struct{}, 1)}
}

// Changed receives a value after a Set, for Options.Changed: one value
// stands for any number of Sets since it was last received.
func (t *Table) Changed() <-chan struct{} { return t.changed }

// Set records names, an empty name forgetting the peer's; with replace the
// table becomes exactly the non-empty names. All or nothing.
func (t *Table) Set(names map[noise.PublicKey]string, replace bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := map[noise.PublicKey]string{}
	if !replace {
		next = maps.Clone(t.names)
	}
	for k, n := range names {
		if n == "" {
			delete(next, k)
		} else {
			next[k] = n
		}
	}
	if len(next) > MaxNames {
		return ErrTooManyNames
	}
	t.names = next
	select {
	case t.changed <- struct{}{}:
	default:
	}
	return nil
}

// Snapshot returns the names; the map is never changed afterwards, so it
// suits Names.
func (t *Table) Snapshot() map[noise.PublicKey]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.names
}

// Applied forgets the names a configuration change overrides: all of them
// when it replaces the peers, and those of peers it removes or gives an
// explicit endpoint (`wg set wg0 peer K endpoint ADDR` means that address).
func (t *Table) Applied(cfg *device.Config) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cfg.ReplacePeers {
		t.names = map[noise.PublicKey]string{}
		return
	}
	var next map[noise.PublicKey]string
	for _, pc := range cfg.Peers {
		if _, ok := t.names[pc.PublicKey]; ok && (pc.Remove || pc.Endpoint != nil) {
			if next == nil {
				next = maps.Clone(t.names)
			}
			delete(next, pc.PublicKey)
		}
	}
	if next != nil {
		t.names = next
	}
}
