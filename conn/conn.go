// Package conn carries WireGuard datagrams over UDP in batches: the Bind
// interface, a Linux implementation with recvmmsg/sendmmsg, UDP_GRO and
// UDP_SEGMENT, a portable fallback, and (in conn/membind) an in-memory bind
// for tests.
package conn

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/fips-go/fips-go/internal/hist"
)

// Endpoint is a peer's UDP address plus, for sticky sockets, the local
// address and interface the last datagram from it arrived on. It is a plain
// comparable value: copying it never allocates, and two endpoints may be
// compared with == to group datagrams for one GSO send.
type Endpoint struct {
	// Dst is the remote address and port.
	Dst netip.AddrPort
	// Src is the local address replies should leave from. The zero value
	// lets the kernel choose.
	Src netip.Addr
	// SrcIfIndex is the interface Src was seen on (0 when unknown).
	SrcIfIndex int32
	// Transport is how datagrams to Dst travel; the zero value is UDP.
	// A Bind sends UDP whatever it says: the device hands the others to
	// their own transport (Stream).
	Transport Transport
}

// ClearSrc forgets the sticky source so the kernel chooses again.
func (e *Endpoint) ClearSrc() { e.Src, e.SrcIfIndex = netip.Addr{}, 0 }

// String is the destination in host:port form ([v6]:port for IPv6).
func (e Endpoint) String() string { return e.Dst.String() }

// ReceiveFunc fills up to len(bufs) datagrams. bufs are caller-owned, each
// with len equal to its usable capacity; on return sizes[i] holds the length
// of datagram i in bufs[i] and eps[i] where it came from. It blocks until at
// least one datagram is available and returns net.ErrClosed (wrapped) once
// the bind is closed. A datagram larger than its buffer is dropped and
// counted, not truncated; when every datagram one read found was too big, it
// returns 0 and ErrOversize rather than waiting for more, so that a caller
// whose buffers fell behind an MTU raise gets to swap them. A bind that
// holds datagrams between calls (UDP GRO) keeps such a datagram for the
// next call, and drops it only if that call's buffers are no larger.
type ReceiveFunc func(bufs [][]byte, sizes []int, eps []Endpoint) (n int, err error)

// Bind is a set of UDP sockets for one listen port.
//
// Open and Close are not safe to call concurrently with each other; Send and
// the ReceiveFuncs are safe for concurrent use between Open and Close.
type Bind interface {
	// Open binds the sockets on port (0 picks one) and returns one receive
	// function per socket (typically IPv4 and IPv6) and the port in use.
	Open(port uint16) (fns []ReceiveFunc, actualPort uint16, err error)
	// Close closes the sockets; blocked ReceiveFuncs return an error.
	// Closing a closed or never opened Bind is not an error.
	Close() error
	// SetMark sets the fwmark (SO_MARK) on all sockets, now and after reopen.
	SetMark(mark uint32) error
	// Send writes every datagram in bufs to ep, as few syscalls as it can:
	// consecutive datagrams of equal size are coalesced into one
	// UDP_SEGMENT send where the kernel supports it. bufs stay owned by the
	// caller and may be reused when Send returns.
	Send(bufs [][]byte, ep Endpoint) error
	// BatchSize is the most datagrams a ReceiveFunc returns, and the batch
	// size Send handles best.
	BatchSize() int
}

// ConnectBind is implemented by binds that can give one remote endpoint a
// UDP socket of its own: a socket on the bind's port, connected to the
// endpoint, which the kernel prefers over the shared socket for datagrams
// from exactly that address. A flood from spoofed sources lands on the
// shared socket and cannot fill the connected one's queue. While the socket
// is open, the bind's Send to that endpoint goes through it (no route
// lookup), and falls back to the shared socket when it fails. Binds without
// it (portable, in-memory) keep working: callers check with a type
// assertion and do without.
//
// A datagram that arrives on a connected socket is no more trusted than any
// other: the socket only says where the kernel queued it.
type ConnectBind interface {
	// Connect opens a socket connected to ep.Dst, bound to ep.Src (the
	// local address the peer wrote to) when valid, else to the wildcard
	// address with the kernel's route choosing the source. It fails with
	// ErrConnectLimit past the bind's cap, ErrConnected when ep.Dst already
	// has one, ErrConnectOff when the bind cannot do it, and ErrBindClosed
	// on a closed bind. Close and reopening the bind close every
	// connected socket.
	Connect(ep Endpoint) (PeerConn, error)
	// ConnectedReceiveFuncs are the receive functions that read every
	// connected socket of the bind's current Open, those connected later
	// included: a fixed number (one on Linux), however many sockets there
	// are, each to be called by one goroutine at a time. They serve the
	// ready sockets in turns, so one busy socket does not starve the
	// others, and behave as the ReceiveFuncs Open returns (batched,
	// GRO-split, timed and counted, ErrOversize, net.ErrClosed once the
	// bind closes or reopens); an error a socket reports in place of a
	// datagram (an ICMP error) is that socket's and never returned. Nil
	// on a closed bind or one whose connected sockets are off.
	ConnectedReceiveFuncs() []ReceiveFunc
}

// PeerConn is one connected socket. Its datagrams are read by the bind's
// ConnectedReceiveFuncs; Send and Close are safe for concurrent use.
type PeerConn interface {
	// Endpoint is the remote address and the local address the socket is
	// bound to (Src; the kernel's choice when Connect was given none).
	Endpoint() Endpoint
	// Send writes bufs to the endpoint on this socket, coalescing with
	// UDP_SEGMENT as Bind.Send does.
	Send(bufs [][]byte) error
	// Close closes the socket; a datagram queued on it and not read yet
	// is lost. Closing twice is not an error.
	Close() error
}

// Stats are the counters a bind keeps; every field is cumulative.
type Stats struct {
	GSOFallbacks   uint64 // sends retried without UDP_SEGMENT after the kernel refused it
	GSOOversize    uint64 // GSO sends whose segments were too big for the path, resent as plain datagrams
	GROFallbacks   uint64 // times UDP_GRO could not be enabled or was turned off
	RxOversize     uint64 // datagrams dropped because they did not fit the buffer
	RxShedStale    uint64 // datagrams dropped unread for their age while shedding (see Shedder)
	RxSocketDrops  uint64 // datagrams the kernel dropped on their way into a socket, mostly for a full receive buffer (asked every 50 ms while reads go on)
	RxBadControl   uint64 // GRO control messages that did not parse
	SendErrors     uint64
	StickyFallback uint64 // sends retried without the sticky source address

	// Connected per-endpoint sockets (ConnectBind): how many were opened
	// and closed (the difference is open now), how many Connect calls
	// failed (cap reached, or the kernel refused), and how many sends on
	// one failed and went out on the shared socket instead.
	ConnOpened    uint64
	ConnClosed    uint64
	ConnFailures  uint64
	ConnFallbacks uint64

	// The counters below show how well batching and offloads work: a
	// message is one entry of a recvmmsg/sendmmsg (or one recvmsg/sendmsg),
	// a packet is one WireGuard datagram. Packets per message above 1 means
	// GRO/GSO coalesced them.
	RxPackets  uint64
	RxMessages uint64
	TxPackets  uint64
	TxMessages uint64

	// RxSojourn is how long received datagrams waited between the kernel
	// receiving them and the bind handing them out: the socket's queue
	// plus the wait for a reader. Element i counts waits of at most 2^i
	// microseconds (and more than 2^(i-1)); the last counts the longer
	// ones. Empty where the kernel gives no receive timestamps.
	RxSojourn [SojournBuckets]uint64
	// RxSojournNanos is the total of those waits, in nanoseconds.
	RxSojournNanos uint64
}

// SojournBuckets is the length of Stats.RxSojourn.
const SojournBuckets = hist.Buckets

// StatsBind is implemented by binds that keep Stats.
type StatsBind interface {
	Stats() Stats
}

// EachSender is a Bind that sends each datagram of a batch to its own
// endpoint in one call: the device's cookie replies, one to each source of
// a flood, which one Send apiece would cost a syscall each. It returns how
// many datagrams went out and the first error. A device whose bind lacks
// it sends them one by one.
type EachSender interface {
	SendEach(bufs [][]byte, eps []Endpoint) (int, error)
}

// Shedder is a Bind that can shed a handshake flood on its shared sockets
// (not the connected ones). While on, their receive buffers are small
// (ShedBuffer), so a reader that paces itself under a flood reads what
// arrived a fraction of a second ago and the kernel drops the rest as it
// comes; and a datagram that waited in the kernel longer than ShedMaxAge
// (queued before shedding began, in the full-size buffer) is dropped
// unread by the receive function, counted in Stats.RxShedStale. Answering
// a message seconds old is useless: the initiator has moved on to another
// attempt, and a cookie for the old one is not accepted.
type Shedder interface {
	Shed(on bool)
}

const (
	// ShedBuffer is a shared socket's receive buffer while shedding: the
	// kernel doubles it, and a 148-byte initiation takes about 1 KiB of
	// it, so about 500 of them (a sixth of a second at the device's
	// default 3,000 handshake reads a second).
	ShedBuffer = 256 << 10
	// ShedMaxAge is the oldest datagram a shedding shared socket's reader
	// delivers; older ones are dropped.
	ShedMaxAge = time.Second
)

// ErrOversize is returned by a ReceiveFunc whose read found only datagrams
// larger than the buffers given.
var ErrOversize = fmt.Errorf("conn: every datagram was larger than its buffer: %w", io.ErrShortBuffer)

// ErrBindClosed is returned by Send on a closed bind. It wraps
// net.ErrClosed, so a caller that stops on a closed socket needs one check,
// errors.Is(err, net.ErrClosed), whichever layer closed first.
var ErrBindClosed = fmt.Errorf("conn: bind closed: %w", net.ErrClosed)

// ErrConnectLimit is returned by Connect when the bind already holds its
// cap of connected sockets; that endpoint keeps using the shared socket.
var ErrConnectLimit = errors.New("conn: connected socket cap reached")

// ErrConnected is returned by Connect for an endpoint that has a connected
// socket already.
var ErrConnected = errors.New("conn: endpoint already has a connected socket")

// ErrConnectOff is returned by Connect when connected sockets are turned
// off or the kernel cannot share the port (SO_REUSEPORT).
var ErrConnectOff = errors.New("conn: connected sockets unavailable")

// ErrBindOpen is returned by Open on a bind that is already open.
var ErrBindOpen = errors.New("conn: bind already open")

// ParseEndpoint parses "ip:port" or "[ipv6]:port" (no host names: resolving
// is the client's job, as in the UAPI protocol).
func ParseEndpoint(s string) (Endpoint, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return Endpoint{}, err
	}
	if ap.Port() == 0 {
		return Endpoint{}, errors.New("conn: endpoint port must not be 0")
	}
	return Endpoint{Dst: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}, nil
}
