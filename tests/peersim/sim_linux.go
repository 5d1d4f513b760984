//go:build linux

package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/fips-go/fips-go/device/noise"
)

// options is one run's settings, from runMain's flags.
type options struct {
	n         int
	seed      uint64
	gateway   netip.AddrPort
	src       netip.Prefix
	basePort  uint16
	storm     time.Duration
	duration  time.Duration
	keepalive time.Duration
	rate      float64
	payload   int
	pings     int
	sockets   int

	retryOnCookie bool
	untilDone     bool
	linger        time.Duration
}

func (o *options) validate() error {
	switch {
	case o.n < 1 || o.n > 1<<22-2:
		return fmt.Errorf("-n %d: want 1 to %d", o.n, 1<<22-2)
	case o.payload < 8 || o.payload > 1300:
		return fmt.Errorf("-payload %d: want 8 to 1300", o.payload)
	case o.rate < 0 || o.rate > 100000:
		return fmt.Errorf("-rate %v: want 0 to 100000", o.rate)
	case o.sockets < 1 || o.sockets > 16:
		return fmt.Errorf("-sockets %d: want 1 to 16", o.sockets)
	case o.storm < 0 || o.duration <= 0 || o.keepalive < 0:
		return fmt.Errorf("-storm, -duration and -keepalive must not be negative")
	case o.pings < 0:
		return fmt.Errorf("-pings %d: must not be negative", o.pings)
	}
	_, last := outerSource(o.src, o.basePort, o.n-1)
	if last < o.basePort {
		return fmt.Errorf("%d peers need more source ports above %d than there are", o.n, o.basePort)
	}
	return nil
}

// The retransmission rule of a real initiator (WireGuard paper, section
// 6.4): Rekey-Timeout plus up to a third of a second of jitter.
const (
	rekeyTimeout = 5 * time.Second
	rekeyJitter  = 333 * time.Millisecond
	// passiveKeepalive is Keepalive-Timeout: a peer that received data
	// and sent nothing since sends a keepalive this long after, or the
	// gateway starts a handshake of its own 15 s after its data.
	passiveKeepalive = 10 * time.Second
	batchSize        = 64
	bufSize          = 2048
	never            = time.Duration(1<<63 - 1)
)

// peer is one simulated WireGuard peer. Times are since the storm's start.
type peer struct {
	mu          sync.Mutex // guards every field below
	hs          *noise.Handshake
	cg          *noise.CookieGenerator
	kp          *noise.Keypair
	first       []byte // the precomputed first initiation, nil once sent
	firstInit   time.Duration
	established time.Duration // -1: no session yet
	retryAt     time.Duration
	nextPing    time.Duration
	lastSend    time.Duration
	lastData    time.Duration // the last data message received, 0: none
	gen         uint32        // of the peer's one live event in the schedule
	evAt        time.Duration // when that event is due, never: none
	initiations uint32
	cookies     uint32
	pingSeq     uint16
	pingsSent   uint32
	replies     uint32
	replyBytes  uint64
	doneAt      time.Duration // -1: not done (session, and its -pings replies)
}

// counters are the run's totals, updated by every goroutine.
type counters struct {
	initiations, retries, cookieReplies, cookieBad, staleResponses,
	keepalivesIn, keepalivesOut, pingsSent, replies, badPackets,
	sendErrors, sent, received, gatewayInitiations atomic.Uint64
}

type sim struct {
	o       options
	peers   []peer
	conns   [][]*ipv4.PacketConn // [source port][socket]
	gwAddr  *net.UDPAddr
	t0      time.Time // the storm's start
	c       counters
	rtt     histogram
	done    atomic.Int64 // peers whose doneAt is set
	evMu    sync.Mutex   // guards ev; taken inside a peer's mu
	ev      eventHeap
	stopped atomic.Bool
}

func newSim(o options) (*sim, error) {
	s := &sim{o: o, peers: make([]peer, o.n), gwAddr: net.UDPAddrFromAddrPort(o.gateway)}
	_, lastPort := outerSource(o.src, o.basePort, o.n-1)
	for port := o.basePort; ; port++ {
		var row []*ipv4.PacketConn
		for range o.sockets {
			c, err := listen(port)
			if err != nil {
				s.close()
				return nil, err
			}
			row = append(row, c)
		}
		s.conns = append(s.conns, row)
		if port == lastPort {
			break
		}
	}
	// Keys, handshakes and first initiations, on every CPU: the storm
	// then costs the simulator only its sends and the responses' DH.
	gwKey := derivedKey(o.seed, -1)
	gwPub := gwKey.PublicKey()
	now := time.Now()
	parallel(o.n, func(i int) {
		p := &s.peers[i]
		p.hs = noise.NewHandshake(noise.NewStatic(derivedKey(o.seed, i)), gwPub, noise.PresharedKey{})
		p.cg = noise.NewCookieGenerator(gwPub)
		p.established, p.doneAt, p.evAt = -1, -1, never
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], uint64(i)^o.seed<<32)
		init, err := p.hs.CreateInitiation(now, rand.NewChaCha8(seed), uint32(i)+1)
		if err != nil {
			panic(fmt.Sprintf("peer %d: %v", i, err)) // our own keys: a bug
		}
		p.first = init.AppendTo(make([]byte, 0, noise.InitiationSize))
		p.cg.AddMACs(p.first, now)
	})
	return s, nil
}

func (s *sim) close() {
	for _, row := range s.conns {
		for _, c := range row {
			c.Close()
		}
	}
}

func (s *sim) since() time.Duration { return time.Since(s.t0) }

// run starts the storm and the receivers, runs the schedule until the end,
// and reports.
func (s *sim) run() (*report, error) {
	s.t0 = time.Now()
	var wg sync.WaitGroup
	for _, row := range s.conns {
		for _, c := range row {
			wg.Add(1)
			go func() { defer wg.Done(); s.receive(c) }()
		}
	}
	s.schedule()
	end := s.since()
	s.stopped.Store(true)
	time.Sleep(500 * time.Millisecond) // replies still on their way
	s.close()
	wg.Wait()
	return s.report(end), nil
}

// schedule is the sending goroutine: the storm's first initiations, then
// retransmissions, echo requests and keepalives as the event heap says.
func (s *sim) schedule() {
	out := newSender(s)
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], s.o.seed^0x5eed)
	rng := rand.NewChaCha8(seed)
	next := 0
	var due []event
	end := s.o.duration
	for {
		now := s.since()
		if s.o.untilDone && end == s.o.duration && s.done.Load() == int64(s.o.n) {
			end = now + s.o.linger
			fmt.Println("done") // the harness measures the idle gateway now
		}
		if now >= end {
			return
		}
		for next < s.o.n && time.Duration(int64(s.o.storm)*int64(next)/int64(s.o.n)) <= now {
			s.sendFirst(next, now, rng, out)
			next++
		}
		s.evMu.Lock()
		due = s.ev.popDue(now, due[:0])
		s.evMu.Unlock()
		for _, e := range due {
			s.tick(e, now, rng, out)
		}
		out.flush()
		time.Sleep(time.Millisecond)
	}
}

func (s *sim) sendFirst(i int, now time.Duration, rng *rand.ChaCha8, out *sender) {
	p := &s.peers[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	out.add(i, func(b []byte) []byte { return append(b[:0], p.first...) })
	p.first = nil
	p.firstInit, p.lastSend = now, now
	p.initiations++
	s.c.initiations.Add(1)
	p.retryAt = now + rekeyTimeout + time.Duration(rng.Uint64()%uint64(rekeyJitter))
	s.push(p, i, p.retryAt)
}

// push makes at the peer's one live event. p.mu must be held.
func (s *sim) push(p *peer, i int, at time.Duration) {
	p.gen++
	p.evAt = at
	s.evMu.Lock()
	s.ev.push(event{at: at, peer: int32(i), gen: p.gen})
	s.evMu.Unlock()
}

// tick is a peer's due event: retransmit the initiation, send an echo
// request, or a keepalive, and schedule the next.
func (s *sim) tick(e event, now time.Duration, rng *rand.ChaCha8, out *sender) {
	i := int(e.peer)
	p := &s.peers[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.gen != p.gen {
		return // superseded
	}
	p.evAt = never
	if p.kp == nil {
		if now >= p.retryAt {
			wall := time.Now()
			init, err := p.hs.CreateInitiation(wall, rng, uint32(i)+1)
			if err != nil {
				panic(fmt.Sprintf("peer %d: %v", i, err)) // our own keys: a bug
			}
			out.add(i, func(b []byte) []byte {
				b = init.AppendTo(b[:0])
				p.cg.AddMACs(b, wall)
				return b
			})
			p.initiations++
			p.lastSend = now
			s.c.initiations.Add(1)
			s.c.retries.Add(1)
			p.retryAt = now + rekeyTimeout + time.Duration(rng.Uint64()%uint64(rekeyJitter))
		}
		s.push(p, i, p.retryAt)
		return
	}
	next := never
	if s.o.rate > 0 && (s.o.pings == 0 || int(p.replies) < s.o.pings) {
		// Every request due since the last tick, a batch at most: the
		// schedule ticks every millisecond, and one peer may send more.
		for k := 0; now >= p.nextPing && k < batchSize; k++ {
			s.sendPing(p, i, now, out)
			p.nextPing += time.Duration(float64(time.Second) / s.o.rate)
		}
		if p.nextPing < now {
			p.nextPing = now // further behind: no burst to catch up
		}
		next = p.nextPing
	}
	if s.o.keepalive > 0 {
		if now-p.lastSend >= s.o.keepalive {
			s.sendKeepalive(p, i, now, out)
		}
		next = min(next, p.lastSend+s.o.keepalive)
	}
	if p.lastData > p.lastSend {
		if now-p.lastData >= passiveKeepalive {
			s.sendKeepalive(p, i, now, out)
		} else {
			next = min(next, p.lastData+passiveKeepalive)
		}
	}
	if next != never {
		s.push(p, i, next)
	}
}

// sendPing seals an ICMP echo request from the peer's tunnel address to
// the gateway's; its payload starts with the send time. p.mu must be held.
func (s *sim) sendPing(p *peer, i int, now time.Duration, out *sender) {
	ctr, ok := p.kp.NextCounter()
	if !ok {
		return
	}
	p.pingSeq++
	seq := p.pingSeq
	out.add(i, func(b []byte) []byte {
		pt := b[noise.TransportHeaderSize:]
		n := buildEcho(pt, innerAddr(i), uint16(i), seq, int64(now), s.o.payload)
		padded := (n + 15) &^ 15
		clear(pt[n:padded])
		noise.PutTransportHeader(b, p.kp.RemoteIndex, ctr)
		return p.kp.Seal(&out.nonce, b[:noise.TransportHeaderSize], ctr, pt[:padded])
	})
	p.pingsSent++
	p.lastSend = now
	s.c.pingsSent.Add(1)
}

// sendKeepalive seals an empty transport message. p.mu must be held.
func (s *sim) sendKeepalive(p *peer, i int, now time.Duration, out *sender) {
	ctr, ok := p.kp.NextCounter()
	if !ok {
		return
	}
	out.add(i, func(b []byte) []byte {
		noise.PutTransportHeader(b, p.kp.RemoteIndex, ctr)
		return p.kp.Seal(&out.nonce, b[:noise.TransportHeaderSize], ctr, nil)
	})
	p.lastSend = now
	s.c.keepalivesOut.Add(1)
}

// receive reads one socket until it is closed, handling each batch and
// sending what it calls for in one batch.
func (s *sim) receive(c *ipv4.PacketConn) {
	out := newSender(s)
	msgs := make([]ipv4.Message, batchSize)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, bufSize)}
	}
	for {
		n, err := c.ReadBatch(msgs, 0)
		if err != nil {
			if s.stopped.Load() {
				return
			}
			if ne, ok := err.(net.Error); ok && !ne.Timeout() {
				return
			}
			continue
		}
		now := s.since()
		for _, m := range msgs[:n] {
			s.c.received.Add(1)
			s.handle(m.Buffers[0][:m.N], now, out)
		}
		if !s.stopped.Load() {
			out.flush()
		}
	}
}

// handle takes in one datagram from the gateway.
func (s *sim) handle(b []byte, now time.Duration, out *sender) {
	if noise.PeekType(b) == noise.TypeInitiation {
		// The gateway starts a handshake of its own: a real peer would
		// answer; the simulator only initiates, and counts it.
		s.c.gatewayInitiations.Add(1)
		return
	}
	idx, ok := noise.ReceiverIndex(b)
	if !ok || idx == 0 || int(idx) > len(s.peers) {
		s.c.badPackets.Add(1)
		return
	}
	i := int(idx) - 1
	p := &s.peers[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	switch noise.PeekType(b) {
	case noise.TypeResponse:
		s.onResponse(p, i, b, now, out)
	case noise.TypeCookieReply:
		s.c.cookieReplies.Add(1)
		r, err := noise.ParseCookieReply(b)
		if err == nil {
			err = p.cg.ConsumeReply(&r, time.Now())
		}
		if err != nil {
			s.c.cookieBad.Add(1)
			return
		}
		p.cookies++
		if s.o.retryOnCookie && p.kp == nil {
			p.retryAt = now
			s.push(p, i, now)
		}
	case noise.TypeTransport:
		s.onTransport(p, i, b, now, out)
	}
}

// onResponse completes the handshake and confirms the session to the
// gateway at once with the first echo request, or a keepalive.
func (s *sim) onResponse(p *peer, i int, b []byte, now time.Duration, out *sender) {
	r, err := noise.ParseResponse(b)
	if err != nil || p.kp != nil {
		s.c.staleResponses.Add(1)
		return
	}
	wall := time.Now()
	if err := p.hs.ConsumeResponse(&r, wall); err != nil {
		s.c.staleResponses.Add(1) // answers an initiation we replaced
		return
	}
	kp, err := p.hs.DeriveKeypair(wall)
	if err != nil {
		s.c.staleResponses.Add(1)
		return
	}
	p.kp, p.established = kp, now
	if s.o.rate > 0 {
		s.sendPing(p, i, now, out)
		p.nextPing = now + time.Duration(float64(time.Second)/s.o.rate)
		if s.o.pings == 0 {
			s.markDone(p, now)
		}
	} else {
		s.sendKeepalive(p, i, now, out)
		s.markDone(p, now)
	}
	next := never
	if s.o.rate > 0 && (s.o.pings == 0 || int(p.replies) < s.o.pings) {
		next = p.nextPing
	}
	if s.o.keepalive > 0 {
		next = min(next, now+s.o.keepalive)
	}
	if next == never {
		p.gen++ // nothing more to do: drop the retransmission event
		p.evAt = never
		return
	}
	s.push(p, i, next)
}

func (s *sim) markDone(p *peer, now time.Duration) {
	if p.doneAt < 0 {
		p.doneAt = now
		s.done.Add(1)
	}
}

// onTransport opens a transport message: a keepalive, or the gateway's
// echo reply to one of ours.
func (s *sim) onTransport(p *peer, i int, b []byte, now time.Duration, out *sender) {
	recv, ctr, err := noise.ParseTransportHeader(b)
	if err != nil || p.kp == nil || recv != p.kp.LocalIndex {
		s.c.badPackets.Add(1)
		return
	}
	pt, err := p.kp.Open(&out.nonce, out.scratch[:0], ctr, b[noise.TransportHeaderSize:])
	if err != nil {
		s.c.badPackets.Add(1)
		return
	}
	if len(pt) == 0 {
		s.c.keepalivesIn.Add(1)
		return
	}
	sent, n, ok := parseEchoReply(pt, innerAddr(i), uint16(i))
	if !ok {
		s.c.badPackets.Add(1)
		return
	}
	s.c.replies.Add(1)
	p.replies++
	if p.lastData <= p.lastSend {
		// The first data since our last send: the passive keepalive is
		// due Keepalive-Timeout from now, unless we send before.
		p.lastData = now
		if p.evAt > now+passiveKeepalive {
			s.push(p, i, now+passiveKeepalive)
		}
	}
	p.lastData = now
	p.replyBytes += uint64(n)
	if d := now - time.Duration(sent); d >= 0 {
		s.rtt.add(d)
	}
	if s.o.pings > 0 && int(p.replies) == s.o.pings {
		s.markDone(p, now)
	}
}
