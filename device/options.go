package device

import (
	"crypto/rand"
	"io"
	"runtime"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/aqm"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/device/timers"
	"github.com/fips-go/fips-go/internal/tuning"
)

// Options configure a Device. The zero value works.
type Options struct {
	// Workers is the number of crypto goroutines (default: the number of
	// CPUs).
	Workers int
	// ListenPort is the UDP port to open at start (0 picks one).
	ListenPort uint16
	// Timers shortens protocol times for tests; the zero value is the
	// protocol's, which every production caller wants.
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
	// and must not block.
	OnTraffic func()
	// OnPeerEvent, if set, is told when a peer completes a handshake, its
	// session expires or its endpoint changes (see PeerEvent). It is
	// called on the device's goroutines, possibly several at once, with no
	// lock held: it must not block.
	OnPeerEvent func(PeerEvent)
	// StateFile, if set, is where the device remembers its recently
	// active peers' endpoints (nothing secret), so that after a restart it
	// starts their sessions itself instead of leaving them waiting for
	// their own timers. It is opened in New and rewritten in place.
	StateFile string
	// PathProbes turns on path-MTU probes: padded transport packets,
	// sealed like data, whose plaintext is not an IP packet. A fips-go
	// peer answers them, which finds a path narrower than the tunnel when
	// no ICMP says so; a stock WireGuard peer drops them (wireguard-go
	// counts them as received data), so they are for peers that run
	// fips-go. Off, the path MTU comes from the kernel alone. Probes from
	// a peer are answered either way. It is the default for peers whose
	// PeerConfig.PathProbes never said.
	PathProbes bool

	// The sizing below is decided, not exposed (docs/architecture.md
	// states the ceilings it gives, docs/benchmarks.md how the defaults
	// were chosen); tests set it directly, other packages' tests through
	// internal/tuning.

	// batchSize is the most packets handed between goroutines at once
	// (default 128).
	batchSize int
	// batches is the number of full-size batches in the pool: with
	// smallBatches, the memory ceiling (default 16; a batch beyond what
	// keeps the workers busy only waits in a queue).
	batches int
	// smallBatches is the number of 4-packet batches that carry reads of a
	// few packets, so those don't each tie up a full batch (default 1024).
	smallBatches int
	// peerQueue is how many batches one peer may have in flight in each
	// direction before its producer waits (default 256).
	peerQueue int
	// stagedPackets caps the packets held per peer while a handshake is
	// pending, dropping the oldest (default 128); stagingBuffers caps them
	// across all peers (default 1024).
	stagedPackets  int
	stagingBuffers int
	// handshakeQueue caps queued handshake messages; a quarter full counts
	// as under load and makes the device demand cookies (default 1024).
	// During a restart storm, not a flood, it takes a backlog of 16 times
	// that, allocated only then.
	handshakeQueue int
	// aqmParams is the sojourn-time controller of each peer's queues
	// (zero: aqm's defaults; negative Target: off).
	aqmParams aqm.Params
	// Under load, these bound the work a flood can cost, a second:
	// initiations with a valid MAC2 from no configured peer's endpoint
	// (strangerHandshakes, default 1000, and strangerHandshakeTime of
	// Diffie-Hellman work, default 20 ms); work on initiations without
	// MAC2 answered at once instead of with a cookie reply, counted only
	// for those that turn out not to be a peer's (anonymousHandshakeTime,
	// default 5 ms; negative: always a cookie reply, as the paper says);
	// cookie replies (cookieReplies, default 1000, and at most 20 to one
	// address); and handshake messages each shared socket's reader takes
	// in, leaving the excess for the kernel to drop at the full socket
	// (handshakeReads, default 1500). Configured peers' traffic is not
	// counted.
	strangerHandshakes     int
	strangerHandshakeTime  time.Duration
	anonymousHandshakeTime time.Duration
	cookieReplies          int
	handshakeReads         int
	// maxPeers caps the configured peers (default 131,072, so a gateway's
	// 100,000 clients fit) and maxAllowedIPs all peers' allowed-IP
	// prefixes together (default 1,048,576); a request that would end
	// past either is refused whole (ErrTooMany).
	maxPeers      int
	maxAllowedIPs int
	// sizeTSO sizes the TUN's GSO maximum so that one TSO super-packet of
	// the host's own TCP seals into one UDP message (see tso.go). Off: the
	// kernel also cuts forwarded super-packets at that maximum, in
	// software, which halves a gateway's throughput.
	sizeTSO bool

	// keyLog, when set (by tests only), sees every keypair as it is
	// installed, so that a wire auditor can check what the device sends.
	keyLog func(*noise.Keypair)
	// probeSend, when set (by tests only), sends path MTU probes of peers
	// without a connected socket (the in-memory bind has none).
	probeSend func(b conn.Bind, datagram []byte, ep conn.Endpoint) error
}

func init() {
	tuning.SetDevice = func(o any, t tuning.Device) {
		opts := o.(*Options)
		opts.batchSize, opts.batches, opts.smallBatches = t.BatchSize, t.Batches, t.SmallBatches
		opts.handshakeQueue, opts.stagingBuffers = t.HandshakeQueue, t.StagingBuffers
	}
}

func (o *Options) setDefaults() {
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.batchSize <= 0 {
		o.batchSize = 128
	}
	if o.batches <= 0 {
		o.batches = 16
	}
	if o.batches < 5 {
		// Each reader holds one while it waits (the TUN's, the two
		// shared sockets', the connected sockets'); one more keeps the
		// traffic of a reader that needs a second moving.
		o.batches = 5
	}
	if o.smallBatches <= 0 {
		o.smallBatches = 1024
	}
	if o.peerQueue <= 0 {
		o.peerQueue = 256
	}
	o.peerQueue = max(2, o.peerQueue)
	if o.stagedPackets <= 0 {
		o.stagedPackets = 128
	}
	if o.stagingBuffers <= 0 {
		o.stagingBuffers = 1024
	}
	if o.handshakeQueue <= 0 {
		o.handshakeQueue = 1024
	}
	if o.strangerHandshakes <= 0 {
		o.strangerHandshakes = 1000
	}
	if o.strangerHandshakeTime <= 0 {
		o.strangerHandshakeTime = 20 * time.Millisecond
	}
	if o.anonymousHandshakeTime == 0 {
		o.anonymousHandshakeTime = 5 * time.Millisecond
	}
	if o.cookieReplies <= 0 {
		o.cookieReplies = 1000
	}
	if o.handshakeReads <= 0 {
		o.handshakeReads = 1500
	}
	if o.maxPeers <= 0 {
		o.maxPeers = 1 << 17
	}
	if o.maxAllowedIPs <= 0 {
		o.maxAllowedIPs = 1 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.aqmParams = o.aqmParams.WithDefaults()
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}
