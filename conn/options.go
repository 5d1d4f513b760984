package conn

import "runtime"

// Options configure the UDP binds. The zero value is a good default.
type Options struct {
	// BatchSize is the most datagrams one ReceiveFunc call returns and the
	// number of recvmmsg/sendmmsg entries per syscall. Default 128, at most
	// 1024 (the kernel's limit on entries per call).
	BatchSize int
	// DisableGSO turns off UDP_SEGMENT on send; DisableGRO turns off
	// UDP_GRO on receive. Both offloads are also turned off at run time
	// when the kernel refuses them, and counted in Stats.
	DisableGSO, DisableGRO bool
	// SocketBuffer is SO_RCVBUF/SO_SNDBUF per socket in bytes (default
	// 7 MiB; negative keeps the kernel's default). With CAP_NET_ADMIN the
	// FORCE variants are used so net.core.rmem_max does not cap it.
	SocketBuffer int
	// GROBuffers is how many 64 KiB buffers a socket reads coalesced
	// datagrams into per recvmmsg (default min(32, BatchSize)). It bounds
	// receive memory at GROBuffers*64 KiB per socket while still letting
	// one syscall carry many more datagrams than BatchSize.
	GROBuffers int
	// MaxConcurrentSends bounds the Sends in flight at once on the Linux
	// bind; more wait for one to finish (default max(4, 2*GOMAXPROCS)).
	// Each holds about 20 KiB of syscall scratch for BatchSize datagrams.
	MaxConcurrentSends int
	// MaxConnected caps the connected per-endpoint sockets (ConnectBind)
	// one Linux bind holds; endpoints past it use the shared socket.
	// Default 1024; negative turns connected sockets off (and leaves
	// SO_REUSEPORT off the shared sockets). Each costs a file descriptor
	// and an entry in an epoll instance; one reader serves all of them
	// (ConnectBind.ConnectedReceiveFuncs), with GROBuffers read buffers
	// of its own.
	MaxConnected int
	// Logf receives rare events (offload fallbacks, socket setup); nil
	// discards. The data path never logs per packet, it counts.
	Logf func(format string, args ...any)
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
	// datagrams) per read keep the socket drained in small steps: against
	// 8, two series of bench-netns.sh put the ping RTT under four streams
	// 8-37% lower at the same throughput and CPU per GB, in 1.3 MiB less
	// RSS (measured when each socket had a reader of its own).
	connGROBuffers  = 2
	connDirectBatch = 32
	// groBufferSize holds the largest coalesced message the kernel builds:
	// UDP GRO stops merging at 64 KiB of payload.
	groBufferSize = 1<<16 - 1
)

// withDefaults returns o with zero fields replaced by defaults and values
// outside the supported range clamped, so every bind validates once.
func (o Options) withDefaults() Options {
	if o.BatchSize <= 0 {
		o.BatchSize = defaultBatchSize
	}
	if o.BatchSize > maxBatchSize {
		o.BatchSize = maxBatchSize
	}
	if o.SocketBuffer == 0 {
		o.SocketBuffer = defaultSocketBuffer
	}
	if o.GROBuffers <= 0 {
		o.GROBuffers = min(defaultGROBuffers, o.BatchSize)
	}
	if o.GROBuffers > o.BatchSize {
		o.GROBuffers = o.BatchSize
	}
	if o.MaxConcurrentSends <= 0 {
		// Two per CPU covers the per-peer sequencers flushing in parallel.
		o.MaxConcurrentSends = max(4, 2*runtime.GOMAXPROCS(0))
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
