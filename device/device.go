// Package device is a WireGuard interface: peers, their sessions and the
// pipelines that move packets between a TUN device and a UDP bind. The
// protocol itself lives in the pure sub-packages (noise, replay, allowedips,
// timers); this package adds the goroutines, queues and I/O around them.
package device

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/allowedips"
	"github.com/fips-go/fips-go/device/internal/obfs"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/device/timers"
	"github.com/fips-go/fips-go/internal/hist"
	"github.com/fips-go/fips-go/tun"
)

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
	work         chan *batch    // crypto jobs, both directions
	known        knownEndpoints // configured peers' endpoints, for triage
	socks        peerSockets    // connected sockets for the peers' endpoints
	flood        floodDefence   // handshake queues and the limits that guard them
	pmtuSig      pmtuSignals    // ICMP errors for packets the path cannot carry
	resume       resumeState    // the state file for resuming after a restart (resume.go)

	cfgMu      sync.Mutex // serializes Apply and bind changes
	listenPort uint16     // guarded by cfgMu
	fwmark     uint32     // guarded by cfgMu
	bindWG     sync.WaitGroup
	// stream is the TCP transport beside the bind (stream.go);
	// streamListen is its configuration, guarded by cfgMu.
	stream       *conn.Stream
	streamListen StreamListen
	proxy        string // the HTTP proxy as configured, "" none (stream.go)
	tlsCertPEM   []byte // the TLS certificate given, nil none (stream.go)

	static  atomic.Pointer[noise.Static] // nil: no private key
	checker atomic.Pointer[noise.CookieChecker]
	obfs    atomic.Pointer[obfs.Params] // nil: off (see Obfuscation)
	s4      atomic.Int32                // see transportPadding

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
		opts:   opts,
		aqmOff: opts.aqmParams.Off(),
		tun:    t,
		bind:   b,
		tp:     opts.Timers.WithDefaults(),
		index:  noise.NewIndexTable[indexEntry](opts.Rand),
		work:   make(chan *batch, opts.batches+opts.smallBatches),
		peers:  make(map[noise.PublicKey]*Peer),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	d.flood.init(&opts)
	mtu, err := t.MTU()
	if err != nil {
		return nil, fmt.Errorf("device: reading TUN MTU: %w", err)
	}
	d.mtu.Store(int32(mtu))
	d.sizeTSO(mtu)
	d.pools.Store(d.newPools(bufSizeFor(mtu)))
	d.wheel = newTimerWheel(d)
	d.staging = newStagePool(opts.stagingBuffers, max(mtu, 1500))

	d.startStream()
	d.cfgMu.Lock()
	err = d.openBindLocked(opts.ListenPort)
	d.cfgMu.Unlock()
	if err != nil {
		d.stream.Close()
		d.readersWG.Wait()
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
	d.openResume(opts.StateFile)
	if d.resume.f != nil {
		d.helpersWG.Add(1)
		go d.resumeWriter()
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
		go func() {
			defer d.bindWG.Done()
			d.receiver(fn, true)
		}()
	}
	if cb, ok := d.bind.(conn.ConnectBind); ok {
		for _, fn := range cb.ConnectedReceiveFuncs() {
			d.readersWG.Add(1)
			d.bindWG.Add(1)
			go func() {
				defer d.bindWG.Done()
				d.receiver(fn, false)
			}()
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
	d.stream.Close()
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
		full:  newBatchPool(d.opts.batches, d.opts.batchSize, bufSize),
		small: newBatchPool(d.opts.smallBatches, smallBatch, bufSize),
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
	if need := bufSizeFor(mtu) + d.transportPadding(); need > old.full.bufSize {
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
