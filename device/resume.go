package device

import (
	"io"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/peerstate"
)

// Resuming sessions after a restart. A restarted process has no session
// keys, so every peer keeps sending under a session it cannot decrypt
// until the peer's own timers start a handshake (15 s for any WireGuard).
// The device therefore remembers, in Options.StateFile, where each
// recently active peer was; the next process, once the peers are
// configured, sends each of them an initiation (and the keepalive that
// follows any completed handshake lets a stock responder confirm the new
// session at once).
//
// The file holds no secret (see peerstate) and is bounded
// (peerstate.MaxEntries). It is opened once in New, before a daemon gives
// up its privileges, and rewritten in place through that descriptor, off
// the data path, at most every resumeWriteEvery and only when it changed;
// a torn write fails the checksum and is ignored. A remembered endpoint is
// only ever used for one initiation to a configured peer, at most
// resumeRate a second, so the file cannot make the device send to
// addresses that its configuration does not name a peer for.
const (
	// resumeFresh is how recent a peer's activity (and the file) must be
	// for the next process to resume it: older sessions are left to the
	// peer, which has likely given up on them or gone away.
	resumeFresh = 2 * time.Minute
	// resumeWriteEvery is how often the file is brought up to date.
	resumeWriteEvery = 2 * time.Second
	// resumeRate is the most resumption initiations sent a second.
	resumeRate = 1000
)

// resumeState is the device's part: guarded by mu.
type resumeState struct {
	mu   sync.Mutex
	f    *os.File // nil: no state file
	last []byte   // content last written, to skip unchanged rewrites
	// remembered are the previous process's fresh entries not yet used,
	// by key id; each is used at most once.
	remembered map[peerstate.KeyID]peerstate.Entry
}

// openResume opens the state file and reads what the last process left.
// Problems are logged: the device works without the file.
func (d *Device) openResume(path string) {
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		d.logf("state file: %v", err)
		return
	}
	b, err := io.ReadAll(io.LimitReader(f, peerstate.MaxSize))
	r := &d.resume
	r.f = f
	if err != nil || len(b) == 0 {
		return
	}
	written, entries, err := peerstate.Parse(b)
	if err != nil {
		d.logf("state file %s: %v (ignored)", path, err)
		return
	}
	now := d.now().Unix()
	if fresh := int64(resumeFresh / time.Second); now-written > fresh || written > now+fresh {
		return
	}
	r.remembered = make(map[peerstate.KeyID]peerstate.Entry)
	for _, e := range entries {
		if now-e.LastActive <= int64(resumeFresh/time.Second) {
			r.remembered[e.ID] = e
		}
	}
	d.logf("state file %s: %d recently active peers to resume", path, len(r.remembered))
}

// logf logs through Options.Logf, if set.
func (d *Device) logf(format string, args ...any) {
	if d.opts.Logf != nil {
		d.opts.Logf(format, args...)
	}
}

// resumeWriter keeps the state file current until the device stops, and
// writes it once more then, so a clean restart finds it fresh.
func (d *Device) resumeWriter() {
	defer d.helpersWG.Done()
	t := time.NewTicker(resumeWriteEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			d.writeResume()
		case <-d.stop:
			d.writeResume()
			d.resume.mu.Lock()
			d.resume.f.Close()
			d.resume.mu.Unlock()
			return
		}
	}
}

// writeResume writes the recently active peers' endpoints, if changed.
func (d *Device) writeResume() {
	now := d.now()
	var entries []peerstate.Entry
	d.peersMu.RLock()
	for _, p := range d.peers {
		if len(entries) == peerstate.MaxEntries {
			break
		}
		var last int64
		if t := p.live.Load(); t != nil {
			last = t.lastRx.Load()
		}
		ep, ok := p.endpoint()
		if !ok || last == 0 || now.Unix()-last > int64(resumeFresh/time.Second) {
			continue
		}
		entries = append(entries, peerstate.Entry{ID: peerstate.IDOf(p.pub), Endpoint: ep.Dst, LastActive: last})
	}
	d.peersMu.RUnlock()
	r := &d.resume
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := peerstate.Append(nil, now.Unix(), entries)
	// Unchanged entries with only a newer time stamp need no rewrite; an
	// empty file is not rewritten either while it stays empty.
	if err != nil || (len(r.last) > 0 && string(b[16:]) == string(r.last[16:])) {
		return
	}
	if _, err = r.f.WriteAt(b, 0); err == nil {
		err = r.f.Truncate(int64(len(b)))
	}
	if err != nil {
		d.logf("state file: %v", err)
		return
	}
	r.last = b
}

// resumeConfigured starts the sessions of configured peers the previous
// process saw recently, once the device has its private key. Called by
// Apply with cfgMu held; the initiations go out on their own goroutine.
func (d *Device) resumeConfigured() {
	r := &d.resume
	r.mu.Lock()
	if len(r.remembered) == 0 || d.static.Load() == nil {
		r.mu.Unlock()
		return
	}
	var todo []*Peer
	d.peersMu.RLock()
	for _, p := range d.peers {
		e, ok := r.remembered[peerstate.IDOf(p.pub)]
		if !ok {
			continue
		}
		delete(r.remembered, e.ID)
		if _, has := p.endpoint(); !has {
			p.setEndpoint(conn.Endpoint{Dst: netip.AddrPortFrom(e.Endpoint.Addr().Unmap(), e.Endpoint.Port())})
		}
		todo = append(todo, p)
	}
	d.peersMu.RUnlock()
	r.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	d.helpersWG.Add(1)
	go d.resumePeers(todo)
}

// resumePeers sends the initiations, resumeRate a second at most.
func (d *Device) resumePeers(todo []*Peer) {
	defer d.helpersWG.Done()
	t := time.NewTicker(time.Second / resumeRate)
	defer t.Stop()
	for i, p := range todo {
		if i > 0 {
			select {
			case <-t.C:
			case <-d.stop:
				return
			}
		}
		p.mu.Lock()
		p.resuming = true
		before := p.lastInitAt
		p.mu.Unlock()
		p.initiate(d.now(), false)
		p.mu.Lock()
		sent := p.lastInitAt != before
		if !sent {
			p.resuming = false
		}
		p.mu.Unlock()
		if sent {
			d.ctr.inc(cResumeInitiations)
		}
	}
}
