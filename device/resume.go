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
// a torn write fails the checksum and is ignored.
//
// It is not an amplifier: nothing received triggers a resumption, a
// remembered endpoint is only used for one handshake attempt (retried by
// the protocol's own rules) with a peer the configuration names, once
// per process, and the initiations are paced: resumeRate a second, and
// none while their responses back up in the handshake queue. resumeRate
// lets 10,000 remembered peers be sent theirs in 2 s, within the 5 s a
// restart may cost them; that is about 6 Mbit/s of initiations, once, to
// peers that were talking to the server anyway.
const (
	// resumeFresh is how recent a peer's activity (and the file) must be
	// for the next process to resume it: older sessions are left to the
	// peer, which has likely given up on them or gone away.
	resumeFresh = 2 * time.Minute
	// resumeWriteEvery is how often the file is brought up to date.
	resumeWriteEvery = 2 * time.Second
	// resumeRate is the most resumption initiations sent a second.
	resumeRate = 5000
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

// resumePeers sends the initiations, resumeRate a second at most, and
// none while the responses already back fill half the queue they wait in:
// a response dropped there would cost its peer Rekey-Timeout, so when the
// handshake workers (or the peers) fall behind, the pace follows them.
func (d *Device) resumePeers(todo []*Peer) {
	defer d.helpersWG.Done()
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	prio := d.flood.hsqPrio.q
	start := time.Now()
	for i := 0; i < len(todo); {
		due := int(time.Since(start)*resumeRate/time.Second) + 1
		if i >= due || len(prio) > cap(prio)/2 {
			select {
			case <-t.C:
			case <-d.stop:
				return
			}
			continue
		}
		d.resumePeer(todo[i])
		i++
	}
}

// resumePeer sends p its resumption initiation.
func (d *Device) resumePeer(p *Peer) {
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
