package device

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun"
)

// batch is the unit of work handed between goroutines: up to len(bufs)
// packets, each in a fixed-size buffer the batch owns. Moving a packet from
// one batch to another swaps buffer slices; nothing is copied.
//
// Layout of bufs[i]:
//   - outbound, before sealing: plaintext at [tun.Headroom : tun.Headroom+sizes[i]]
//   - outbound, after sealing: the datagram at [0 : sizes[i]]
//   - inbound, before opening: the datagram at [0 : sizes[i]]
//   - inbound, after opening: plaintext at [tun.Headroom : tun.Headroom+sizes[i]]
type batch struct {
	pool     *batchPool
	bufs     [][]byte
	sizes    []int
	counters []uint64
	ok       []bool
	eps      []conn.Endpoint
	peers    []*Peer     // outbound routing scratch
	kps      []*keypair  // inbound routing scratch
	out      [][]byte    // slice headers handed to Bind.Send / Device.Write
	nonce    noise.Nonce // the AEAD's scratch while the batch is sealed or opened
	n        int

	peer   *Peer
	sendKP *noise.Keypair // outbound: the keypair the counters belong to
	recvKP *keypair       // inbound: the keypair the datagrams name
	rxPad  int            // inbound: S4 bytes before each transport message
	rng    padRNG         // outbound: transport padding (obfuscation.go)
	done   atomic.Bool    // crypto finished; the sequencer may flush it
	// flows are the packets' flow buckets, counted in their peer's
	// flowq while the batch is queued (outbound only).
	flows   []uint8
	counted bool // flows were added to the peer's flowq
	// born is when a reader returned the batch's packets (zero for
	// batches made elsewhere), for the sojourn-time histograms.
	born time.Time
}

func (b *batch) reset() {
	b.n = 0
	b.peer, b.sendKP, b.recvKP = nil, nil, nil
	b.rxPad = 0
	b.born = time.Time{}
	b.counted = false
	b.done.Store(false)
}

// Ownership. A batch has exactly one owner at a time, and only the owner
// touches its buffers:
//   - a reader (TUN reader, UDP receiver) gets it from a pool and fills it;
//   - routing hands it whole to one peer (or moves packets into batches of
//     the same pool by swapping buffers; see moveInto);
//   - sendBatch / queueInbound push it into the peer's sequencer and hand
//     it to a crypto worker (or do the crypto inline), which owns it until
//     it marks it done;
//   - the goroutine that flushes the sequencer owns it from popDone until
//     it has been sent or written, and then releases it to its pool.
//
// Buffers never cross pools: every buffer of a pool has the pool's size,
// and a retired pool (the MTU outgrew it) must be able to let all of its
// batches go to the garbage collector. A buffer swapped into another pool
// would be too small there, or would outlive its pool's retirement.

// batchPool is a fixed number of batches. get blocks when all are in use, so
// a producer that outruns the crypto workers or the network waits instead of
// allocating: this is the device's memory ceiling.
//
// The free batches are a stack: the most recently released is handed out
// next. Its buffers are still in the CPU's cache, and a batch the load never
// needed is never allocated, so the memory a pool holds is its peak use, not
// its cap (a FIFO would cycle through, and allocate, every batch).
type batchPool struct {
	tokens chan struct{} // one per batch not in use: get takes one, release returns it

	mu    sync.Mutex // guards stack
	stack []*batch   // free batches; unallocated ones at the bottom

	size    int // packets per batch
	bufSize int // bytes per packet buffer
	retired atomic.Bool
	gone    chan struct{} // closed on retirement, so waiters move to the new pool
}

func newBatchPool(count, size, bufSize int) *batchPool {
	p := &batchPool{
		tokens: make(chan struct{}, count),
		stack:  make([]*batch, count),
		size:   size, bufSize: bufSize, gone: make(chan struct{}),
	}
	for i := range count {
		// Buffers are allocated on first use so that an idle device stays small.
		p.stack[i] = &batch{pool: p}
		p.tokens <- struct{}{}
	}
	return p
}

// pop takes the top of the stack; the caller holds a token, so it is not
// empty.
func (p *batchPool) pop() *batch {
	p.mu.Lock()
	b := p.stack[len(p.stack)-1]
	p.stack = p.stack[:len(p.stack)-1]
	p.mu.Unlock()
	return b
}

func (p *batchPool) push(b *batch) {
	p.mu.Lock()
	p.stack = append(p.stack, b)
	p.mu.Unlock()
	p.tokens <- struct{}{}
}

// inUse is how many batches are out, at this moment.
func (p *batchPool) inUse() int { return cap(p.tokens) - len(p.tokens) }

func (p *batchPool) alloc(b *batch) {
	n := p.size
	backing := make([]byte, n*p.bufSize)
	b.bufs = make([][]byte, n)
	for i := range b.bufs {
		b.bufs[i] = backing[i*p.bufSize : (i+1)*p.bufSize : (i+1)*p.bufSize]
	}
	b.sizes = make([]int, n)
	b.flows = make([]uint8, n)
	b.counters = make([]uint64, n)
	b.ok = make([]bool, n)
	b.eps = make([]conn.Endpoint, n)
	b.peers = make([]*Peer, n)
	b.kps = make([]*keypair, n)
	b.out = make([][]byte, 0, n)
}

// get returns a batch, waiting for one if all are in use; nil once stop
// closes or the pool is retired.
func (p *batchPool) get(stop <-chan struct{}) *batch {
	select {
	case <-p.tokens:
		return p.prepare(p.pop())
	case <-stop:
		return nil
	case <-p.gone:
		return nil
	}
}

func (p *batchPool) retire() {
	p.retired.Store(true)
	close(p.gone)
}

// tryGet returns a batch or nil without waiting.
func (p *batchPool) tryGet() *batch {
	select {
	case <-p.tokens:
		return p.prepare(p.pop())
	default:
		return nil
	}
}

func (p *batchPool) prepare(b *batch) *batch {
	if b.bufs == nil {
		p.alloc(b)
	}
	b.reset()
	return b
}

// put returns b to its pool. Batches of a retired pool (the MTU grew past
// the buffer size) are left to the garbage collector.
func (b *batch) release() {
	p := b.pool
	for i := range b.peers[:b.n] {
		b.peers[i] = nil
	}
	for i := range b.kps[:b.n] {
		b.kps[i] = nil
	}
	b.reset()
	if p.retired.Load() {
		return
	}
	p.push(b)
}

// smallBatch is the capacity of small batches.
const smallBatch = 4

// copyInto copies the first n packets of src into a fresh small batch dst:
// bytes [from, from+size) of each buffer, with sizes and endpoints. For a
// few packets a copy is cheaper than tying up a full-size batch. The two
// batches may come from pools of different buffer sizes (an MTU change
// between the two gets); a packet that does not fit is left out, and the
// count of those is returned for the caller to count as a drop.
func copyInto(dst, src *batch, n, from int) (dropped int) {
	for i := 0; i < n; i++ {
		if !appendPacket(dst, src, i, from, false) {
			dropped++
		}
	}
	return dropped
}

// moveInto appends packet j of src to dst. Within one pool it swaps the
// buffers, so nothing is copied; across pools it copies, so that a buffer
// never migrates into a pool of another size, where it would outlive the
// pool's retirement or be too small for its batches. It reports false, and
// moves nothing, when the packet does not fit dst's buffer.
func moveInto(dst, src *batch, j, from int) bool {
	return appendPacket(dst, src, j, from, dst.pool == src.pool)
}

// appendPacket appends packet j of src (bytes [from, from+size) of its
// buffer) to dst, by swapping buffers if swap is set, else by copying; a
// copy that does not fit dst's buffer is refused (false).
func appendPacket(dst, src *batch, j, from int, swap bool) bool {
	size := src.sizes[j]
	switch {
	case swap:
		dst.bufs[dst.n], src.bufs[j] = src.bufs[j], dst.bufs[dst.n]
	case from+size > len(dst.bufs[dst.n]):
		return false
	default:
		copy(dst.bufs[dst.n][from:from+size], src.bufs[j][from:from+size])
	}
	dst.sizes[dst.n] = size
	dst.eps[dst.n] = src.eps[j]
	dst.born = src.born
	dst.n++
	return true
}

// bufSizeFor is the buffer size that holds a packet of the given MTU with the
// transport header in front and padding plus tag behind. Receive buffers
// must also hold datagrams from peers whose MTU is larger than ours, so the
// size never drops below what a 1500-byte MTU needs.
func bufSizeFor(mtu int) int {
	m := max(mtu, 1500)
	n := tun.Headroom + (m+15)&^15 + noise.TagSize
	return (n + 63) &^ 63
}
