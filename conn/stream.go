package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn/internal/srclimit"
)

// Stream carries WireGuard datagrams over TCP, beside the UDP bind, for
// networks that pass only TCP: each datagram is preceded by its length,
// 16-bit big-endian, as in Mullvad's udp-over-tcp (conn/internal/streamframe),
// on the TCP connection itself (TransportTCP) or inside TLS (TransportTLS,
// stream_tls.go).
//
// It listens, when told to, for peers that connect to it (the server side;
// one port serves both, told apart by the first bytes), and dials an
// endpoint whose Transport is a stream the first time a datagram is sent to
// it (the client side). Either way, one connection carries one peer's
// datagrams both ways, and its remote address, with its transport, is the
// Endpoint the receive function reports and Send takes: to the device it
// is just another endpoint.
//
// Memory is bounded: at most 256 connections, each with a read buffer of
// streamframe.ReaderSize, a send queue of at most 1 MiB (twice, while one
// is written) and, over TLS, 128 KiB that gather the records of one write
// into one system call (tlsBatchBytes); the send queues of all
// connections together hold at most 64 MiB; and a shared pool of 16
// receive chunks of 128 KiB. A queue starts at 16 KiB and doubles only
// when full: a connection that carries little never holds more. The cap
// is set by the inner TCP, which knows of no queue here but by its drops:
// its window grows until the queue overflows, and a smaller queue
// overflows sooner and more often (docs/benchmarks.md has the figures for
// 128 KiB to 2 MiB). A connection whose peer reads slowly, or whose queue
// cannot grow, drops its own frames when its queue is full
// (StreamStats.TxQueueDrops); no Send ever waits for the network.
//
// An accepted connection is unproven until the device sends to it (it
// answers only a message that authenticated or carried a valid MAC1, so
// only someone who knows the device's public key gets that far): at most
// 32 such connections are held, each for at most 5 s and 160 frames. A
// zero-length frame closes any connection. A TLS handshake costs the
// server a signature and a key exchange before that, so each source (an
// IPv4 address, an IPv6 /64) may begin a burst of 8 and then 4 a second;
// a connection past that is closed before its handshake
// (StreamStats.TLSLimited). The sources are kept in a table of at most
// 4096, the least recently seen forgotten first (conn/internal/srclimit).
type Stream struct {
	opts StreamOptions
	done chan struct{} // closed by Close
	rx   streamRx
	ctr  streamCounters
	wg   sync.WaitGroup // listener loops, connection goroutines, dials
	// queued is the bytes of send-queue buffers all connections hold,
	// at most opts.queueTotal (see streamConn.reserve).
	queued atomic.Int64

	// mu guards the fields below. It is a leaf: nothing is called with it
	// held that takes another lock, except a connection's own qmu.
	mu       sync.Mutex
	closed   bool
	lns      []net.Listener
	port     uint16 // listening port, 0 when not listening
	mark     uint32
	conns    map[connKey]*streamConn
	unproven int                       // accepted connections not yet proven
	names    map[netip.AddrPort]string // TLS server names (SetServerName)
	proxy    *url.URL                  // HTTP CONNECT proxy (SetProxy), nil: none

	tls streamTLS // the listener's TLS configuration (stream_tls.go)
}

// connKey names a connection: a TCP and a TLS connection to one address
// may be open at once (the device races them). An accepted connection is
// filed under TCP until its first bytes show it is TLS.
type connKey struct {
	dst netip.AddrPort
	t   Transport
}

// StreamOptions configure a Stream. The zero value is a good default.
type StreamOptions struct {
	// Logf receives rare events (listening, dial failures); nil discards.
	Logf func(format string, args ...any)

	// Decided, not exposed; tests set them.

	// maxConns caps the connections held, accepted and dialed (default
	// 256). Accepts past it are closed at once.
	maxConns int
	// maxUnproven caps the accepted connections the device has not sent
	// to yet (default 32); proveTimeout is how long one may stay so
	// (default 5 s) and unprovenFrames how many frames it may deliver
	// meanwhile (default 160, room for AmneziaWG's junk).
	maxUnproven    int
	proveTimeout   time.Duration
	unprovenFrames int
	// queueBytes caps one connection's queued frames (default 1 MiB);
	// queueTotal caps the queue buffers of all connections together
	// (default 64 MiB).
	queueBytes, queueTotal int
	// dialTimeout bounds one dial (default 5 s); after a failed dial the
	// endpoint is not dialed again for dialBackoff (default 1 s) and
	// frames to it are dropped.
	dialTimeout, dialBackoff time.Duration
	// writeTimeout closes a connection whose peer has not taken a write
	// for this long (default 15 s).
	writeTimeout time.Duration
	// tlsLimit is the per-source limit on TLS handshakes (stream_tls.go).
	tlsLimit srclimit.Options
	// dial, when set, replaces the TCP dial.
	dial func(ctx context.Context, addr netip.AddrPort, mark uint32) (net.Conn, error)
}

const (
	defaultStreamConns    = 256
	defaultStreamUnproven = 32
	defaultProveTimeout   = 5 * time.Second
	defaultUnprovenFrames = 160
	defaultStreamQueue    = 1 << 20
	defaultStreamQueueAll = 64 << 20
	// streamQueueStart is a queue's first size: a connection that
	// carries little never holds more.
	streamQueueStart       = 16 << 10
	defaultDialTimeout     = 5 * time.Second
	defaultDialBackoff     = time.Second
	defaultStreamWriteWait = 15 * time.Second
)

func (o StreamOptions) withDefaults() StreamOptions {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.maxConns, defaultStreamConns)
	def(&o.maxUnproven, defaultStreamUnproven)
	def(&o.unprovenFrames, defaultUnprovenFrames)
	def(&o.queueBytes, defaultStreamQueue)
	def(&o.queueTotal, defaultStreamQueueAll)
	defDur(&o.proveTimeout, defaultProveTimeout)
	defDur(&o.dialTimeout, defaultDialTimeout)
	defDur(&o.dialBackoff, defaultDialBackoff)
	defDur(&o.writeTimeout, defaultStreamWriteWait)
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.dial == nil {
		o.dial = dialTCP
	}
	return o
}

// ErrStreamClosed is returned by Send and Listen on a closed Stream; it
// wraps net.ErrClosed.
var ErrStreamClosed = fmt.Errorf("conn: stream closed: %w", net.ErrClosed)

// ErrNotStream is returned by Send for an endpoint whose transport is not
// a stream (TransportTCP or TransportTLS).
var ErrNotStream = errors.New("conn: endpoint is not a stream endpoint")

// NewStream returns a Stream that neither listens nor holds a connection:
// it costs nothing until it is told to listen or sent to.
func NewStream(opts StreamOptions) *Stream {
	s := &Stream{
		opts:  opts.withDefaults(),
		done:  make(chan struct{}),
		conns: make(map[connKey]*streamConn),
		names: make(map[netip.AddrPort]string),
	}
	s.rx.init(s.done)
	return s
}

// ReceiveFunc reads the datagrams every connection delivers, batched as a
// Bind's receive functions are. It is one function for all connections,
// to be called by one goroutine at a time; it returns ErrStreamClosed
// once the Stream is closed.
func (s *Stream) ReceiveFunc() ReceiveFunc { return s.rx.receive(&s.ctr) }

// Listen accepts connections on port, IPv4 and IPv6, replacing the
// listener it had (port 0 picks one; the port in use is returned).
// Connections already accepted stay. A failure leaves the old listener.
func (s *Stream) Listen(port uint16) (uint16, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrStreamClosed
	}
	if s.port != 0 && s.port == port {
		return port, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(int(port))))
	if err != nil {
		return 0, fmt.Errorf("conn: stream listen on TCP port %d: %w", port, err)
	}
	s.stopListeningLocked()
	s.lns = []net.Listener{ln}
	s.port = uint16(ln.Addr().(*net.TCPAddr).Port)
	s.wg.Add(1)
	go s.accept(ln)
	s.opts.Logf("conn: stream transport listening on TCP port %d", s.port)
	return s.port, nil
}

// StopListening closes the listener; connections already accepted stay.
func (s *Stream) StopListening() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopListeningLocked()
}

func (s *Stream) stopListeningLocked() {
	for _, ln := range s.lns {
		ln.Close()
	}
	s.lns, s.port = nil, 0
}

// Port is the TCP port being listened on, 0 when none.
func (s *Stream) Port() uint16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// SetMark sets the fwmark (SO_MARK) of connections dialed from now on, so
// that policy routing keeps the tunnel's own TCP out of the tunnel.
func (s *Stream) SetMark(mark uint32) {
	s.mu.Lock()
	s.mark = mark
	s.mu.Unlock()
}

// SetServerName sets the name a TLS connection dialed to dst sends as its
// server name (SNI); "" (the default) sends none. Connections already open
// keep theirs.
func (s *Stream) SetServerName(dst netip.AddrPort, name string) {
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" {
		delete(s.names, dst)
		return
	}
	s.names[dst] = name
}

// Close closes the listener and every connection and waits for their
// goroutines; blocked receive functions return ErrStreamClosed. Closing
// twice is not an error.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.stopListeningLocked()
	conns := make([]*streamConn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.shut()
	}
	s.wg.Wait()
	return nil
}

// Send queues bufs as frames on ep's connection, dialing one if there is
// none (and the last dial to it did not fail within a second). It never
// waits for the network: what does not fit the queue is dropped and
// counted. bufs may be reused when it returns. An empty or over-long
// datagram is dropped and counted, never sent.
func (s *Stream) Send(bufs [][]byte, ep Endpoint) error {
	if !ep.Transport.IsStream() {
		return ErrNotStream
	}
	c, err := s.connFor(ep.Dst, ep.Transport)
	if err != nil {
		s.ctr.txNoConn.Add(uint64(len(bufs)))
		return err
	}
	c.enqueue(bufs)
	return nil
}

// Drop closes the connection this Stream dialed to ep, if it has one
// (one an address dialed in is left alone): the device closes the loser
// of a race between transports with it.
func (s *Stream) Drop(ep Endpoint) {
	k := connKey{netip.AddrPortFrom(ep.Dst.Addr().Unmap(), ep.Dst.Port()), ep.Transport}
	s.mu.Lock()
	c := s.conns[k]
	if c == nil || c.inbound {
		s.mu.Unlock()
		return
	}
	delete(s.conns, k)
	s.mu.Unlock()
	c.shut()
}

// ViaProxy reports whether ep's connection was dialed through the HTTP
// proxy.
func (s *Stream) ViaProxy(ep Endpoint) bool {
	k := connKey{netip.AddrPortFrom(ep.Dst.Addr().Unmap(), ep.Dst.Port()), ep.Transport}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conns[k]
	return c != nil && c.viaProxy
}

// connFor returns dst's connection, starting a dial when there is none.
func (s *Stream) connFor(dst netip.AddrPort, t Transport) (*streamConn, error) {
	k := connKey{netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port()), t}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrStreamClosed
	}
	if c := s.conns[k]; c != nil {
		if !c.failedAt.IsZero() {
			if c.inbound {
				return nil, errNoDial
			}
			if time.Since(c.failedAt) < s.opts.dialBackoff {
				return nil, errDialBackoff
			}
			delete(s.conns, k)
		} else {
			s.proveLocked(c)
			return c, nil
		}
	}
	if len(s.conns) >= s.opts.maxConns {
		s.pruneLocked()
		if len(s.conns) >= s.opts.maxConns {
			s.ctr.connsRejected.Add(1)
			return nil, errStreamFull
		}
	}
	c := newStreamConn(s, k, nil)
	s.conns[k] = c
	s.wg.Add(1)
	c.viaProxy = s.proxy != nil
	go c.dial(s.mark, s.names[k.dst], s.proxy)
	return c, nil
}

var (
	errDialBackoff = errors.New("conn: stream endpoint unreachable, not redialed yet")
	errNoDial      = errors.New("conn: stream endpoint connected to us and is gone; not dialed back")
	errStreamFull  = errors.New("conn: stream connection cap reached")
)

// pruneLocked forgets failed dials whose back-off is over and closed
// accepted connections, making room.
func (s *Stream) pruneLocked() {
	for k, c := range s.conns {
		if !c.failedAt.IsZero() && (c.inbound || time.Since(c.failedAt) >= s.opts.dialBackoff) {
			delete(s.conns, k)
		}
	}
}

// accept serves one listener until it is closed.
func (s *Stream) accept(ln net.Listener) {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: wait a little, as
			// net/http does, rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
				continue
			case <-s.done:
				return
			}
		}
		backoff = 0
		s.admit(nc)
	}
}

// admit takes an accepted connection if the caps allow.
func (s *Stream) admit(nc net.Conn) {
	ta, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		nc.Close()
		return
	}
	ap := ta.AddrPort()
	dst := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) >= s.opts.maxConns {
		s.pruneLocked()
	}
	if s.closed || s.unproven >= s.opts.maxUnproven || len(s.conns) >= s.opts.maxConns {
		s.ctr.connsRejected.Add(1)
		nc.Close()
		return
	}
	k := connKey{dst, TransportTCP}
	for _, t := range []Transport{TransportTCP, TransportTLS} {
		if old := s.conns[connKey{dst, t}]; old != nil {
			delete(s.conns, connKey{dst, t})
			go old.shut()
		}
	}
	c := newStreamConn(s, k, nc)
	c.inbound = true
	s.conns[k] = c
	c.counted = true
	s.unproven++
	s.ctr.connsAccepted.Add(1)
	s.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
	c.proveTimer = time.AfterFunc(s.opts.proveTimeout, c.unprovenTimeout)
}

// forget removes c from the table once it is closed (unless a newer
// connection to the same address took its place). A failed dial stays as
// a marker for the dial back-off, and a closed accepted connection as a
// marker not to dial its address (both pruned when the table is full).
func (s *Stream) forget(c *streamConn, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.counted {
		c.counted = false
		s.unproven--
	}
	if s.conns[c.key] != c {
		return
	}
	if (failed || c.inbound) && !s.closed {
		c.failedAt = time.Now()
		return
	}
	delete(s.conns, c.key)
}

// refile moves an accepted connection found to be TLS to its key.
func (s *Stream) refile(c *streamConn, t Transport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := connKey{c.key.dst, t}
	if s.conns[c.key] == c {
		delete(s.conns, c.key)
		if old := s.conns[k]; old != nil {
			go old.shut()
		}
		s.conns[k] = c
	}
	c.key = k
}

// proveLocked marks c proven: the device sent to it, which it does only
// for a peer whose message authenticated or carried a valid MAC1.
func (s *Stream) proveLocked(c *streamConn) {
	if !c.counted {
		return
	}
	c.counted = false
	s.unproven--
	c.proven.Store(true)
	if c.proveTimer != nil {
		c.proveTimer.Stop()
	}
}

// openConns is how many connections are open or being dialed.
func (s *Stream) openConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		if c.failedAt.IsZero() {
			n++
		}
	}
	return n
}

func dialTCP(ctx context.Context, addr netip.AddrPort, mark uint32) (net.Conn, error) {
	d := net.Dialer{Control: markControl(mark)}
	return d.DialContext(ctx, "tcp", addr.String())
}

// queueCap is the size a queue of capacity have grows to for need bytes:
// doubled from streamQueueStart, never past queueBytes (enqueue refuses a
// frame that would pass it).
func (o *StreamOptions) queueCap(have, need int) int {
	n := max(have, streamQueueStart)
	for n < need {
		n *= 2
	}
	return min(n, o.queueBytes)
}
