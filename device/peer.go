package device

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/replay"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/device/timers"
)

// keypair is a noise.Keypair as the device tracks it: with its owner and its
// replay window. The window is touched only by the peer's receive sequencer,
// which flushes one batch at a time.
type keypair struct {
	*noise.Keypair
	peer   *Peer
	replay replay.Window
}

// Peer is one remote WireGuard peer.
type Peer struct {
	d   *Device
	pub noise.PublicKey

	// txMu serializes the peer's senders (the TUN reader, the timer
	// goroutine, the handshake worker's keepalive) from the staged-packet
	// check to the counter assignment, so staged packets are never
	// overtaken. It is the outermost lock of the peer's send path.
	txMu sync.Mutex

	mu         sync.Mutex // guards the fields below up to the blank line
	hs         *noise.Handshake
	hsIndex    uint32 // index of the in-flight handshake in d.index, 0 if none
	kps        noise.Keypairs
	timers     timers.Timers
	keepalive  uint16 // persistent keepalive interval in seconds
	lastInitAt time.Time
	// initByCookie: the last initiation was the immediate retry that a
	// cookie reply allows once per attempt.
	initByCookie bool
	resuming     bool      // our last initiation resumes a previous process's session
	lastHSAt     time.Time // last completed handshake
	staged       [][]byte  // copies of packets waiting for a session, oldest first
	scheduledAt  time.Time // deadline the timer wheel holds for us (zero: none)
	stagedDue    bool      // a session is up: the wheel sends the staged packets

	// removed is set once, when the peer is removed, before its routes go
	// (see removePeerLocked); it is atomic so that the receive path can
	// drop a removed peer's in-flight batches without taking mu.
	removed atomic.Bool

	cookies *noise.CookieGenerator // safe for concurrent use

	// transport is how the configured endpoint is reached (stream.go):
	// written under both d.cfgMu and mu, read under either.
	transport conn.Transport
	fb        fallback // TransportAuto's choice (fallback.go)
	// sni is the TLS server name (guarded by mu), filed with the Stream
	// under sniDst (guarded by d.cfgMu; stream.go).
	sni    string
	sniDst netip.AddrPort

	epMu    sync.RWMutex // guards ep
	ep      conn.Endpoint
	hasEp   bool
	epKnown bool // guarded by epMu: ep.Dst is counted in d.known (knownep.go)
	txBytes atomic.Uint64
	rxBytes atomic.Uint64
	// live is what the peer needs only once it carries packets (see
	// peerTraffic); nil for a configured peer that never had a session.
	live atomic.Pointer[peerTraffic]
	// keepalives and epChanges count keepalives sent and endpoint moves,
	// for the metrics endpoint.
	keepalives, epChanges atomic.Uint64
	// pmtu is what the peer's path carries (pmtu.go), allocated with the
	// first packet: a configured peer that never sends costs no path state.
	pmtu      atomic.Pointer[peerPMTU]
	probeMode atomic.Uint32 // the peer's own probe setting: probesDefault follows Options.PathProbes
	heapIdx   int           // position in the timer wheel heap, guarded by wheel.mu; -1 when absent
	wheelAt   time.Time     // guarded by wheel.mu
}

func (d *Device) newPeer(pub noise.PublicKey) *Peer {
	p := &Peer{
		d:       d,
		pub:     pub,
		hs:      noise.NewHandshake(d.static.Load(), pub, noise.PresharedKey{}),
		cookies: noise.NewCookieGenerator(pub),
		heapIdx: -1,
	}
	p.timers.Init(d.tp)
	return p
}

// peerTraffic is the part of a peer that only carrying packets needs:
// both sequencers, the CoDel controllers and the flow counts, about
// 0.85 KiB. A gateway's configured peers are mostly idle road warriors,
// and 100,000 of them held 85 MiB of it before a single packet; now a
// peer gets it with its first batch and keeps it (the idle wheel shrinks
// the sequencers' rings inside, see releaseIfIdle).
type peerTraffic struct {
	sendq   sequencer
	sendOut [][]byte // datagrams of one flush, guarded by sendq.flushMu
	recvq   sequencer
	aqm     peerAQM
	// flowq counts, per flow bucket (see flowBucket), the outbound packets
	// queued in sendq and not yet sent: a packet whose bucket is at zero
	// may be sent ahead of the queue without passing any of its own flow.
	flowq [flowBuckets]atomic.Int32
	// queued is the sum of flowq: the outbound packets queued or being
	// sent, which bounds how far a direct send may overtake.
	queued atomic.Int32
	idle   idleMark // touched only by the wheel's goroutine
	// lastRx is when the last authenticated packet came, in Unix seconds
	// (resume.go): seconds are all the state file keeps.
	lastRx atomic.Int64
}

// carry returns the peer's traffic state, allocating it on first use;
// any goroutine may call it, with or without the peer's locks.
func (p *Peer) carry() *peerTraffic {
	if t := p.live.Load(); t != nil {
		return t
	}
	t := new(peerTraffic)
	t.sendq.init(p.d.opts.peerQueue)
	t.recvq.init(p.d.opts.peerQueue)
	t.aqm.init(p.d.opts.aqmParams)
	if p.live.CompareAndSwap(nil, t) {
		return t
	}
	return p.live.Load() // another goroutine's came first
}

func (p *Peer) endpoint() (conn.Endpoint, bool) {
	p.epMu.RLock()
	defer p.epMu.RUnlock()
	return p.ep, p.hasEp
}

// rescheduleLocked tells the timer wheel about a deadline earlier than the
// one it holds. Later deadlines are left alone: the wheel wakes early, finds
// nothing due and asks again, which is cheaper than touching the heap on
// every batch.
func (p *Peer) rescheduleLocked() {
	next := p.timers.Next()
	if next.IsZero() {
		return
	}
	if p.scheduledAt.IsZero() || next.Before(p.scheduledAt) {
		p.scheduledAt = next
		p.d.wheel.schedule(p, next)
	}
}

// currentSendKeypairLocked is the keypair to send with, or nil if there is
// none that may still be used.
func (p *Peer) currentSendKeypairLocked(now time.Time) *noise.Keypair {
	kp := p.kps.Current
	if kp == nil || p.d.tp.Expired(kp.Created, now) || kp.SendCount() >= noise.RejectAfterMessages {
		return nil
	}
	return kp
}

// zeroKeys wipes every keypair and the handshake state (3 x REJECT_AFTER_TIME
// without a new session, or the peer/device going away).
func (p *Peer) zeroKeys() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.zeroKeysLocked()
}

func (p *Peer) zeroKeysLocked() {
	for _, kp := range p.kps.Clear() {
		if kp != nil {
			p.d.index.Delete(kp.LocalIndex)
			kp.Wipe()
		}
	}
	if p.hsIndex != 0 {
		p.d.index.Delete(p.hsIndex)
		p.hsIndex = 0
	}
	p.hs.Clear()
}

// stageLocked keeps copies of packets that wait for a session, in buffers
// from the device's staging pool, not the batch pool: a peer that never
// answers must not hold the data path hostage. Beyond the per-peer limit, or
// when the pool is empty, the peer's oldest packet makes room.
func (p *Peer) stageLocked(bufs [][]byte, sizes []int) {
	limit := p.d.opts.stagedPackets
	for i := range bufs {
		pkt := bufs[i][stagedFrom : stagedFrom+sizes[i]]
		var buf []byte
		if len(p.staged) < limit {
			buf = p.d.staging.get()
		}
		if buf == nil {
			if len(p.staged) == 0 {
				p.d.ctr.inc(cTxStagedDropped)
				continue
			}
			buf = p.staged[0]
			copy(p.staged, p.staged[1:])
			p.staged = p.staged[:len(p.staged)-1]
			p.d.ctr.inc(cTxStagedDropped)
		}
		if len(pkt) > cap(buf) {
			// The MTU grew since this buffer was made; replace it one for one.
			buf = make([]byte, 0, len(pkt))
		}
		p.staged = append(p.staged, append(buf[:0], pkt...))
	}
}

// sendStagedSoonLocked has the timer goroutine send the staged packets. Not
// done in place: the callers are crypto workers and the handshake worker, and
// sending may wait for a free batch, which only the workers can free.
func (p *Peer) sendStagedSoonLocked(now time.Time) {
	if len(p.staged) == 0 {
		return
	}
	p.stagedDue = true
	p.scheduledAt = now
	p.d.wheel.schedule(p, now)
}

// takeStagedLocked hands over the staged packets; the taker returns their
// buffers to d.staging.
func (p *Peer) takeStagedLocked() [][]byte {
	s := p.staged
	p.staged = nil
	p.stagedDue = false
	return s
}

// dropStagedLocked discards the staged packets and returns how many.
func (p *Peer) dropStagedLocked() int {
	n := len(p.staged)
	for _, b := range p.staged {
		p.d.staging.put(b)
	}
	p.staged = nil
	return n
}

// stagePool is a bounded set of packet buffers for staging, allocated on
// first use and reused after.
type stagePool struct {
	free    chan []byte
	size    int
	mu      sync.Mutex // guards made
	made    int
	maxMade int
}

func newStagePool(count, size int) *stagePool {
	return &stagePool{free: make(chan []byte, count), size: size, maxMade: count}
}

func (s *stagePool) get() []byte {
	select {
	case b := <-s.free:
		return b
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.made >= s.maxMade {
		return nil
	}
	s.made++
	return make([]byte, 0, s.size)
}

func (s *stagePool) put(b []byte) {
	select {
	case s.free <- b[:0]:
	default: // cannot happen: at most maxMade buffers exist
	}
}
