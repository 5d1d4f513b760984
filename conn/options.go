package conn

import "runtime"

// Options configure the UDP binds. The zero value is a good default.
type Options struct {
	// DisableGSO turns off UDP_SEGMENT on send; DisableGRO turns off
	// UDP_GRO on receive: escape hatches for a kernel that mishandles
	// them. Both are also turned off at run time when the kernel refuses
	// them, and counted in Stats.
	DisableGSO, DisableGRO bool
	// MaxConnected caps the connected per-endpoint sockets (ConnectBind)
	// one Linux bind holds, each a file descriptor; endpoints past it use
	// the shared socket. Default 1024; negative turns connected sockets
	// off (and SO_REUSEPORT with them).
	MaxConnected int
	// Logf receives rare events (offload fallbacks, socket setup); nil
	// discards. The data path never logs per packet, it counts.
	Logf func(format string, args ...any)

	// Decided, not exposed; tests set them.

	// batchSize is the most datagrams one ReceiveFunc call returns and
	// the mmsg entries per syscall (default 128, at most 1024).
	batchSize int
	// socketBuffer is SO_RCVBUF/SO_SNDBUF per socket (default 7 MiB;
	// negative keeps the kernel's), forced past net.core.rmem_max with
	// CAP_NET_ADMIN.
	socketBuffer int
	// groBuffers is how many 64 KiB buffers a socket reads coalesced
	// datagrams into per recvmmsg (default min(32, batchSize)): receive
	// memory per socket is groBuffers*64 KiB.
	groBuffers int
	// maxConcurrentSends bounds the Sends in flight on the Linux bind,
	// each with about 20 KiB of scratch (default max(4, 2*GOMAXPROCS)).
	maxConcurrentSends int
}

const (
	defaultBatchSize    = 128
	maxBatchSize        = 1024 // UIO_MAXIOV bounds the entries of one mmsg call
	defaultSocketBuffer = 7 << 20
	defaultGROBuffers   = 32
	defaultMaxConnected = 1024
	// connGROBuffers is how many coalesced messages one turn of a
	// connected socket reads (see connReader); connDirectBatch bounds a
	// turn without GRO. Two coalesced messages (up to about 90
	// datagrams) per read keep the socket drained in small steps, which
	// lowered the loaded RTT against 8 (docs/benchmarks.md).
	connGROBuffers  = 2
	connDirectBatch = 32
	// groBufferSize holds the largest coalesced message the kernel builds:
	// UDP GRO stops merging at 64 KiB of payload.
	groBufferSize = 1<<16 - 1
)

// withDefaults returns o with zero fields replaced by defaults and values
// outside the supported range clamped, so every bind validates once.
func (o Options) withDefaults() Options {
	if o.batchSize <= 0 {
		o.batchSize = defaultBatchSize
	}
	if o.batchSize > maxBatchSize {
		o.batchSize = maxBatchSize
	}
	if o.socketBuffer == 0 {
		o.socketBuffer = defaultSocketBuffer
	}
	if o.groBuffers <= 0 {
		o.groBuffers = min(defaultGROBuffers, o.batchSize)
	}
	if o.groBuffers > o.batchSize {
		o.groBuffers = o.batchSize
	}
	if o.maxConcurrentSends <= 0 {
		// Two per CPU covers the per-peer sequencers flushing in parallel.
		o.maxConcurrentSends = max(4, 2*runtime.GOMAXPROCS(0))
	}
	if o.MaxConnected == 0 {
		o.MaxConnected = defaultMaxConnected
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// NewDefault returns the best bind for this platform: the batched,
// offloading Linux bind on Linux and the portable one elsewhere.
func NewDefault(opts Options) Bind { return newDefault(opts) }
