// Package device is a WireGuard interface: peers, their sessions and the
// pipelines that move packets between a TUN device and a UDP bind. The
// protocol itself lives in the pure sub-packages (noise, replay, allowedips,
// timers); this package adds the goroutines, queues and I/O around them.
package device

import (
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/fips-go/fips-go/device/internal/aqm"
	"github.com/fips-go/fips-go/internal/hist"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/allowedips"
	"github.com/fips-go/fips-go/device/internal/ratelimit"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/device/timers"
	"github.com/fips-go/fips-go/tun"
)

// Options configure a Device. The zero value works.
type Options struct {
	// Workers is the number of crypto goroutines (default: the number of CPUs).
	Workers int
	// BatchSize is the most packets handed between goroutines at once (default 128).
	BatchSize int
	// Batches is the number of full-size batches in the pool; with
	// SmallBatches it is the device's memory ceiling: (Batches * BatchSize +
	// SmallBatches * smallBatch) packet buffers (default 16: under four
	// iperf3 streams on the netns bench, 16 carried as much as 48 in 3 runs
	// each, and peak RSS fell from 26 to 19 MiB; a batch taken beyond what
	// keeps the workers busy only waits in a queue).
	Batches int
	// SmallBatches is the number of small batches (4 packets) that carry
	// reads of a few packets, such as a UDP stream read one packet at a
	// time, so that those don't each tie up a full batch (default 1024).
	SmallBatches int
	// PeerQueue is how many batches one peer may have in flight in each
	// direction; a producer waits beyond it (default 256; the pools bound
	// memory). Measured on the netns setup, 24/8/4 gave 2.29/1.89/1.66
	// Gbit/s with 7.6/5.8/7.3 ms RTT under load: depth buys throughput, and
	// the loaded RTT comes mostly from elsewhere (the TUN's own queue).
	PeerQueue int
	// StagedPackets caps the packets held per peer while a handshake is
	// pending; the oldest is dropped beyond it (default 128).
	StagedPackets int
	// StagingBuffers caps the packets staged across all peers (default 1024).
	StagingBuffers int
	// HandshakeQueue caps queued handshake messages; a quarter full counts
	// as "under load" and makes the device demand cookies (default 1024).
	// While the initiations worked on are mostly answered (a restart
	// storm, not a flood) the queue takes a backlog of 16 times that,
	// its buffers allocated only then (docs/architecture.md).
	HandshakeQueue int
	// AQM sets the sojourn-time controller on each peer's queues (zero:
	// aqm's defaults, 1 ms target, 10 ms interval; negative Target: off).
	AQM aqm.Params
	// StrangerHandshakes bounds, under load, the initiations a second that
	// carry a valid MAC2 but come from no configured peer's endpoint: each
	// costs a Diffie-Hellman computation, and an attacker may hold cookies
	// for any number of addresses (default 1000, a burst of a tenth of it).
	// Known peers' initiations are not counted.
	StrangerHandshakes int
	// StrangerHandshakeTime bounds the same initiations by the time their
	// handling takes: under load, their Diffie-Hellman work may take this
	// much of each second, with as much again as a burst (default 20 ms, 2%
	// of one core; 1,000 a second took about 6% of a core on the 2-core
	// test machine). A slower machine, or one whose CPU a flood already
	// contends, answers fewer.
	StrangerHandshakeTime time.Duration
	// AnonymousHandshakeTime bounds, under load, the handshake work a
	// second on initiations without MAC2 from unknown addresses that are
	// answered at once instead of with a cookie reply, counting only the
	// ones that turn out not to be a configured peer's (a flood's):
	// default 5 ms, 0.5% of one core; negative: every such initiation gets a
	// cookie reply, as the protocol's paper describes.
	AnonymousHandshakeTime time.Duration
	// CookieReplies bounds the cookie replies a second under load, each a
	// send of its own; messages past it are dropped and counted
	// (default 1,000, a burst of a tenth of it). One address gets at most
	// 20 a second of them (a burst of 5), as ratelimit.Limiter's
	// defaults. A configured peer's initiations are answered from their
	// own share (see triage).
	CookieReplies int
	// HandshakeReads bounds, under load, the handshake messages a second
	// that each shared socket's reader takes in; past it the reader waits
	// and the kernel drops the excess at the full socket, for far less
	// than reading it and checking its MAC1 costs (default 1,500: the
	// cookie budget and 500 more for messages that carry a valid MAC2; a
	// burst of a twentieth of it). Configured peers' traffic arrives on
	// their connected sockets and is not paced. Both defaults come from the
	// flood benchmark against 130,000-150,000 initiations a second (docs/benchmarks.md,
	// Handshake flood): each reply is a send, and at 2,500 a second they
	// cost the legitimate peers about a tenth of their throughput; a server
	// that expects roaming clients during a flood may raise them, at the
	// CPU's cost.
	HandshakeReads int
	// MaxPeers caps the configured peers (default 131,072: a gateway's
	// 100,000 road-warrior clients fit, which wireguard-go's 65,536 does
	// not; docs/architecture.md states what each costs); a request that
	// would end with more is refused whole (ErrTooMany).
	MaxPeers int
	// MaxAllowedIPs caps the allowed-IP prefixes of all peers together
	// (default 1,048,576, about 150 MiB of routing table); a request that
	// could end with more is refused whole (ErrTooMany).
	MaxAllowedIPs int
	// ListenPort is the UDP port to open at start (0 picks one).
	ListenPort uint16
	// SizeTSO sets the TUN's GSO maximum so that one TSO super-packet of
	// the host's own TCP seals into one UDP message (see tso.go). Off by
	// default: the kernel also applies that maximum to packets it forwards
	// into the TUN, and cuts every forwarded super-packet at or above it
	// in software, so on a gateway the daemon read one packet per read and
	// carried half the throughput. Only a host that never forwards into
	// its tunnel gains from it (a few percent, see docs/benchmarks.md).
	SizeTSO bool
	// Timers shortens protocol times for tests; the zero value is the
	// protocol's defaults, which is what every production caller wants.
	Timers timers.Params
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Rand is the randomness for keys and indices (default crypto/rand).
	Rand io.Reader
	// Logf receives operational messages (nil discards). The data path
	// never logs per packet; it counts.
	Logf func(format string, args ...any)
	// OnTraffic, if set, is called by the TUN reader and the UDP readers
	// each time a read returns packets, on the data path: it must be cheap
	// and must not block (the daemon passes the GOMAXPROCS controller's
	// procs.Waker.Kick, one atomic load).
	OnTraffic func()
	// OnPeerEvent, if set, is told when a peer completes a handshake,
	// its session expires or its endpoint changes (see PeerEvent). It is
	// called on the device's goroutines, possibly several at once, with
	// no lock held: it must not block (hand the event to a goroutine of
	// your own, as package tunnel does).
	OnPeerEvent func(PeerEvent)

	// keyLog, when set (by tests only), sees every keypair as it is
	// installed, so that a wire auditor can check what the device sends.
	keyLog func(*noise.Keypair)
}

func (o *Options) setDefaults() {
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 128
	}
	if o.Batches <= 0 {
		o.Batches = 16
	}
	if o.Batches < 5 {
		// Each reader holds one while it waits (the TUN's, the two
		// shared sockets', the connected sockets'); one more keeps the
		// traffic of a reader that needs a second moving.
		o.Batches = 5
	}
	if o.SmallBatches <= 0 {
		o.SmallBatches = 1024
	}
	if o.PeerQueue <= 0 {
		o.PeerQueue = 256
	}
	o.PeerQueue = max(2, o.PeerQueue)
	if o.StagedPackets <= 0 {
		o.StagedPackets = 128
	}
	if o.StagingBuffers <= 0 {
		o.StagingBuffers = 1024
	}
	if o.HandshakeQueue <= 0 {
		o.HandshakeQueue = 1024
	}
	if o.StrangerHandshakes <= 0 {
		o.StrangerHandshakes = 1000
	}
	if o.StrangerHandshakeTime <= 0 {
		o.StrangerHandshakeTime = 20 * time.Millisecond
	}
	if o.AnonymousHandshakeTime == 0 {
		o.AnonymousHandshakeTime = 5 * time.Millisecond
	}
	if o.CookieReplies <= 0 {
		o.CookieReplies = 1000
	}
	if o.HandshakeReads <= 0 {
		o.HandshakeReads = 1500
	}
	if o.MaxPeers <= 0 {
		o.MaxPeers = 1 << 17
	}
	if o.MaxAllowedIPs <= 0 {
		o.MaxAllowedIPs = 1 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.AQM = o.AQM.WithDefaults()
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Device is one WireGuard interface.
//
// Lock order, outermost first; a lock may be taken while holding any lock
// to its left, never one to its right:
//
//	cfgMu -> peersMu -> Peer.txMu -> sequencer.flushMu -> aipMu -> Peer.mu
//	      -> {index table, sequencer.mu, wheel.mu}
//
// Peer.epMu is nearly a leaf: it is taken under cfgMu and peersMu (rebind,
// removal), under flushMu (flushSend, deliver) and alone, with only
// known.mu, a true leaf, and socks.mu, which holds only bind calls, taken
// inside it (setEndpoint).
// flushMu is held across Bind.Send and TUN writes, which makes it the
// outermost lock of the data path proper. A producer waiting for room in a
// sequencer (sequencer.reserve) holds at most Peer.txMu, which no flush
// needs. Status takes peersMu, then aipMu, then each peer's locks, one at a
// time, never nested. mtuMu guards only the pool swap and nests nothing.
type Device struct {
	opts  Options
	tun   tun.Device
	bind  conn.Bind
	tp    timers.Params
	mtu   atomic.Int32
	mtuMu sync.Mutex // serializes mtuChanged (event loop and TUN reader)
	// tsoMTU is the MTU the TUN's GSO maximum was last sized for (0:
	// never), tsoShrunk whether that left it below the kernel's default;
	// both under mtuMu (see sizeTSO).
	tsoMTU    int
	tsoShrunk bool
	// lastMTUProbe is when a receiver last re-read the MTU (Unix ns).
	lastMTUProbe atomic.Int64
	pools        atomic.Pointer[pools] // swapped whole when the MTU outgrows the buffers
	staging      *stagePool
	ctr          counters
	aqmOff       bool // opts.AQM.Off(), read per batch
	sojourn      [numStages]hist.Hist
	index        *noise.IndexTable[indexEntry]
	wheel        *timerWheel
	limit        *ratelimit.Limiter
	load         ratelimit.LoadGauge // cookie mode, with its hold time
	work         chan *batch         // crypto jobs, both directions
	hsq          *hsQueue            // handshake messages from anyone
	hsqPrio      *hsQueue            // ... that proved their source or answer our handshake
	known        knownEndpoints      // configured peers' endpoints, for triage
	socks        peerSockets         // connected sockets for the peers' endpoints
	limitKnown   *ratelimit.Limiter  // priority slots without MAC2, per known address
	strangers    *ratelimit.Bucket   // MAC2-proven initiations from unknown endpoints
	strangerTime *ratelimit.Share    // the time those initiations' handling takes
	knownTime    *ratelimit.Share    // the time known endpoints' initiations without MAC2 take
	anonTime     *ratelimit.Share    // the time other initiations without MAC2 take, unanswered
	answered     atomic.Uint64       // initiations answered: configured peers', fresh (see receiver)
	yield        ratelimit.Yield     // whether the initiations worked on are mostly answered
	cookieBudget *ratelimit.Bucket   // what the anonymous queue may take under load
	limitCookies *ratelimit.Limiter  // the same, per address
	shedMu       sync.Mutex          // serializes changes of shedding and the bind's Shed
	shedding     atomic.Bool         // the bind sheds a flood (conn.Shedder); set under shedMu

	cfgMu      sync.Mutex // serializes Apply and bind changes
	listenPort uint16     // guarded by cfgMu
	fwmark     uint32     // guarded by cfgMu
	bindWG     sync.WaitGroup

	static  atomic.Pointer[noise.Static] // nil: no private key
	checker atomic.Pointer[noise.CookieChecker]

	peersMu sync.RWMutex // guards peers
	peers   map[noise.PublicKey]*Peer

	aipMu sync.RWMutex // guards aip
	aip   allowedips.Table[*Peer]

	stop      chan struct{} // closed by Close
	closeOnce sync.Once
	done      chan struct{} // closed when the device has stopped
	doneErr   error
	readersWG sync.WaitGroup // TUN reader, bind receivers
	helpersWG sync.WaitGroup // handshake workers, timer wheel, event loop
	workersWG sync.WaitGroup // crypto workers
}

// indexEntry is what a receiver index names: an in-flight handshake (kp nil)
// or a keypair.
type indexEntry struct {
	peer *Peer
	kp   *keypair
}

// ErrClosed is returned by operations on a closed device.
var ErrClosed = errors.New("device: closed")

// New starts a device on t and b: it opens the bind on opts.ListenPort and
// starts the pipelines. Close stops it.
func New(t tun.Device, b conn.Bind, opts Options) (*Device, error) {
	opts.setDefaults()
	d := &Device{
		opts:    opts,
		aqmOff:  opts.AQM.Off(),
		tun:     t,
		bind:    b,
		tp:      opts.Timers.WithDefaults(),
		index:   noise.NewIndexTable[indexEntry](opts.Rand),
		limit:   ratelimit.New(ratelimit.Options{}),
		work:    make(chan *batch, opts.Batches+opts.SmallBatches),
		hsq:     newHSQueue(opts.HandshakeQueue, hsBacklog*opts.HandshakeQueue),
		hsqPrio: newHSQueue(max(16, opts.HandshakeQueue/4), 0),
		peers:   make(map[noise.PublicKey]*Peer),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	// limitKnown bounds what a spoofer of a known endpoint gets.
	d.limitKnown = ratelimit.New(ratelimit.Options{})
	d.strangers = ratelimit.NewBucket(opts.StrangerHandshakes, opts.StrangerHandshakes/10)
	d.strangerTime = ratelimit.NewShare(opts.StrangerHandshakeTime, opts.StrangerHandshakeTime)
	d.knownTime = ratelimit.NewShare(knownUnprovenTime, knownUnprovenTime)
	if opts.AnonymousHandshakeTime > 0 {
		d.anonTime = ratelimit.NewShare(opts.AnonymousHandshakeTime, opts.AnonymousHandshakeTime)
	}
	d.cookieBudget = ratelimit.NewBucket(opts.CookieReplies, opts.CookieReplies/10)
	d.limitCookies = ratelimit.New(ratelimit.Options{})
	mtu, err := t.MTU()
	if err != nil {
		return nil, fmt.Errorf("device: reading TUN MTU: %w", err)
	}
	d.mtu.Store(int32(mtu))
	d.sizeTSO(mtu)
	d.pools.Store(d.newPools(bufSizeFor(mtu)))
	d.wheel = newTimerWheel(d)
	d.staging = newStagePool(opts.StagingBuffers, max(mtu, 1500))

	d.cfgMu.Lock()
	err = d.openBindLocked(opts.ListenPort)
	d.cfgMu.Unlock()
	if err != nil {
		return nil, err
	}
	for range opts.Workers {
		d.workersWG.Add(1)
		go d.cryptoWorker()
	}
	for range min(2, opts.Workers) {
		d.helpersWG.Add(1)
		go d.handshakeWorker()
	}
	d.helpersWG.Add(2)
	go d.wheel.run()
	go d.tunEvents()
	d.readersWG.Add(1)
	go d.tunReader()
	return d, nil
}

// openBindLocked opens the bind and starts one receiver per shared socket
// and the connected sockets' fixed readers.
func (d *Device) openBindLocked(port uint16) error {
	fns, actual, err := d.bind.Open(port)
	if err != nil {
		return fmt.Errorf("%w: opening UDP port %d: %w", ErrPortInUse, port, err)
	}
	if d.fwmark != 0 {
		if err := d.bind.SetMark(d.fwmark); err != nil {
			d.bind.Close()
			return fmt.Errorf("device: setting fwmark %d on port %d: %w", d.fwmark, actual, err)
		}
	}
	d.listenPort = actual
	for _, fn := range fns {
		d.readersWG.Add(1)
		d.bindWG.Add(1)
		go d.receiver(fn, true)
	}
	if cb, ok := d.bind.(conn.ConnectBind); ok {
		for _, fn := range cb.ConnectedReceiveFuncs() {
			d.readersWG.Add(1)
			d.bindWG.Add(1)
			go d.receiver(fn, false)
		}
	}
	return nil
}

// Done is closed when the device has stopped, on Close or because its TUN
// went away; Err then says why.
func (d *Device) Done() <-chan struct{} { return d.done }

// Err is the reason the device stopped (nil after a plain Close).
func (d *Device) Err() error {
	select {
	case <-d.done:
		return d.doneErr
	default:
		return nil
	}
}

// Close stops the device: the TUN and bind are closed, every goroutine
// ends, and all keys are wiped. It is safe to call more than once.
func (d *Device) Close() error {
	d.shutdown(nil)
	<-d.done
	return nil
}

func (d *Device) shutdown(reason error) {
	d.closeOnce.Do(func() {
		d.doneErr = reason
		close(d.stop)
		go d.teardown()
	})
}

// teardown undoes New in reverse: producers first, then the helpers that
// feed the workers, then the workers.
func (d *Device) teardown() {
	d.cfgMu.Lock()
	d.socks.shutdown()
	d.bind.Close()
	d.cfgMu.Unlock()
	d.tun.Close()
	d.readersWG.Wait()
	d.helpersWG.Wait()
	close(d.work)
	d.workersWG.Wait()
	d.peersMu.Lock()
	for _, p := range d.peers {
		p.zeroKeys()
	}
	d.peersMu.Unlock()
	close(d.done)
}

func (d *Device) stopping() bool {
	select {
	case <-d.stop:
		return true
	default:
		return false
	}
}

// tunEvents follows MTU changes; the TUN closing its event channel is
// handled by the reader, which sees the device gone.
func (d *Device) tunEvents() {
	defer d.helpersWG.Done()
	ev := d.tun.Events()
	for {
		select {
		case <-d.stop:
			return
		case e, ok := <-ev:
			if !ok {
				return
			}
			if e&tun.EventMTUUpdate != 0 {
				d.mtuChanged()
			}
		}
	}
}

// pools are the device's two batch pools, which always have the same
// buffer size: they are published together so that no reader sees a new
// full-size pool beside an old small one.
type pools struct {
	full  *batchPool // BatchSize packets a batch
	small *batchPool // smallBatch packets a batch
}

func (d *Device) newPools(bufSize int) *pools {
	return &pools{
		full:  newBatchPool(d.opts.Batches, d.opts.BatchSize, bufSize),
		small: newBatchPool(d.opts.SmallBatches, smallBatch, bufSize),
	}
}

// mtuChanged swaps in pools with larger buffers when the MTU outgrew them.
// Batches of the old pools finish their trip and are then left to the GC,
// so the memory ceiling is briefly the sum of both sets.
func (d *Device) mtuChanged() {
	d.mtuMu.Lock()
	defer d.mtuMu.Unlock()
	mtu, err := d.tun.MTU()
	if err != nil || mtu <= 0 {
		return
	}
	d.mtu.Store(int32(mtu))
	d.sizeTSO(mtu)
	old := d.pools.Load()
	if need := bufSizeFor(mtu); need > old.full.bufSize {
		d.pools.Store(d.newPools(need))
		old.full.retire()
		old.small.retire()
		d.wakeTUNReader()
		d.opts.Logf("device: MTU %d: packet buffers grown to %d bytes", mtu, need)
	}
}

// mtuProbeEvery bounds how often a datagram too big for our buffers makes
// the device re-read the MTU: such datagrams need no key to send, and each
// look costs a few syscalls.
const mtuProbeEvery = 100 * time.Millisecond

// probeMTU re-reads the MTU unless it did so within mtuProbeEvery.
func (d *Device) probeMTU() {
	now := d.now().UnixNano()
	last := d.lastMTUProbe.Load()
	if now-last < int64(mtuProbeEvery) || !d.lastMTUProbe.CompareAndSwap(last, now) {
		return
	}
	d.mtuChanged()
}

// wakeTUNReader makes a TUN read that is waiting with buffers of the old
// size return at once (tun.ErrWoken), so that the reader swaps them before
// the first packet at the new MTU arrives: that packet would otherwise not
// fit and be lost. TUNs without a pollable file wake on
// their next packet instead.
func (d *Device) wakeTUNReader() { tun.WakeReader(d.tun) }

// getBatch waits for a free full-size batch; nil once the device stops.
func (d *Device) getBatch() *batch { return d.getFrom(false) }

// getSmall waits for a free small batch; nil once the device stops.
func (d *Device) getSmall() *batch { return d.getFrom(true) }

func (d *Device) getFrom(small bool) *batch {
	for {
		p := d.pools.Load().full
		if small {
			p = d.pools.Load().small
		}
		b := p.get(d.stop)
		if b != nil && !b.pool.retired.Load() {
			return b
		}
		if b != nil {
			b.release()
		}
		if d.stopping() {
			return nil
		}
	}
}

func (d *Device) now() time.Time { return d.opts.Now() }

// traffic tells Options.OnTraffic that a reader returned packets.
func (d *Device) traffic() {
	if f := d.opts.OnTraffic; f != nil {
		f()
	}
}
