package metrics

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/fips-go/fips-go/internal/http1"
)

// serverConfig holds the server's caps and timeouts. Serve uses
// defaultServerConfig; tests shorten the timeouts.
type serverConfig struct {
	// maxConns: a scraper needs one connection, a few more let curl in
	// beside it. At the cap a new connection takes the slot of the one
	// that has waited longest for its next request, so idle keep-alive
	// connections (anyone who reaches the endpoint can open them) never
	// keep a scraper out; only when every connection is reading or
	// answering a request does the new one wait for a slot.
	maxConns int
	// maxHead caps a request head (request line and header fields); a
	// larger one is answered 431. Empty lines before a request count.
	maxHead int
	// readHeaderTimeout: a head must arrive within this of the
	// connection's accept (first request) or of its first byte (later
	// ones); a client that is slower is cut off without an answer.
	readHeaderTimeout time.Duration
	writeTimeout      time.Duration // to write one response
	idleTimeout       time.Duration // a kept-alive connection's wait for the next request
	closeGrace        time.Duration // Close's wait for responses in progress
	linger            time.Duration // to drain a refused client's input before closing
}

func defaultServerConfig() serverConfig {
	return serverConfig{
		maxConns:          8,
		maxHead:           8 << 10,
		readHeaderTimeout: 5 * time.Second,
		writeTimeout:      15 * time.Second,
		idleTimeout:       time.Minute,
		closeGrace:        time.Second,
		linger:            time.Second,
	}
}

// ListenAddress completes a --metrics address: a bare port (":9586" or
// "9586") means loopback, so the endpoint is never public by accident; a
// named host, including 0.0.0.0, is taken as given.
func ListenAddress(addr string) (string, error) {
	if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: want [HOST]:PORT, e.g. 127.0.0.1:9586", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("metrics address %q: bad port", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// ListenTCP binds addr after ListenAddress completed it.
func ListenTCP(addr string) (*net.TCPListener, error) {
	addr, err := ListenAddress(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return ln.(*net.TCPListener), nil
}

// Server is a running metrics endpoint: an HTTP/1.1 server of one
// resource with keep-alive, answering requests on a connection in turn.
type Server struct {
	ln    net.Listener
	h     *Handler
	cfg   serverConfig
	logf  func(format string, args ...any)
	slots chan struct{}  // a token per open connection
	idled chan struct{}  // a connection began waiting for a request; capacity 1
	done  chan struct{}  // closed by Close
	wg    sync.WaitGroup // the accept loop and every connection's goroutine
	once  sync.Once      // Close's work

	mu       sync.Mutex
	closed   bool                   // guarded by mu
	conns    map[*srvConn]connState // guarded by mu
	evicting int                    // guarded by mu; closed for room, not yet gone
}

// connState is what a connection is doing, for Close and for the choice
// of the one that makes room at the cap.
type connState struct {
	phase connPhase
	// since orders the waiting connections, oldest first: when the last
	// request began to be answered, or the accept. (Not when the answer
	// ended: a client may send its next request on another connection
	// before this one's goroutine records that.)
	since   time.Time
	evicted bool // closed to make room
}

type connPhase uint8

const (
	waiting   connPhase = iota // for the first byte of a request
	reading                    // a request head
	answering                  // a request
)

// Serve serves h on ln until Close. logf (nil discards) hears of a panic
// while answering, which costs its connection, not the process.
func Serve(ln net.Listener, h *Handler, logf func(format string, args ...any)) *Server {
	return serve(ln, h, defaultServerConfig(), logf)
}

func serve(ln net.Listener, h *Handler, cfg serverConfig, logf func(format string, args ...any)) *Server {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := &Server{
		ln:    ln,
		h:     h,
		cfg:   cfg,
		logf:  logf,
		slots: make(chan struct{}, cfg.maxConns),
		idled: make(chan struct{}, 1),
		done:  make(chan struct{}),
		conns: map[*srvConn]connState{},
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting, closes the connections that are not answering a
// request, and waits up to a second for those that are; then it closes
// them too. It returns once every goroutine of the server has ended (a
// Source that never returns would hold it).
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		if err = s.ln.Close(); errors.Is(err, net.ErrClosed) {
			err = nil
		}
		s.closeConns(false)
		ended := make(chan struct{})
		go func() {
			s.wg.Wait()
			close(ended)
		}()
		t := time.NewTimer(s.cfg.closeGrace)
		defer t.Stop()
		select {
		case <-ended:
		case <-t.C:
			s.closeConns(true)
			<-ended
		}
	})
	return err
}

// closeConns marks the server closed and closes the idle connections, or
// all of them.
func (s *Server) closeConns(all bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c, st := range s.conns {
		if all || st.phase != answering {
			c.nc.Close()
		}
	}
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or the like: wait, then try again.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		if !s.takeSlot() {
			nc.Close()
			return
		}
		c := &srvConn{nc: nc, accepted: time.Now()}
		if !s.track(c) {
			nc.Close()
			<-s.slots
			return
		}
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

// takeSlot takes a connection slot for a connection just accepted. At the
// cap it closes the connection that has waited longest for a request and
// takes its slot once that one is gone; with none waiting, it waits until
// one is or a slot frees. False when Close began.
func (s *Server) takeSlot() bool {
	for {
		select {
		case s.slots <- struct{}{}:
			return true
		default:
		}
		s.evictOldestIdle()
		select {
		case s.slots <- struct{}{}:
			return true
		case <-s.idled:
		case <-s.done:
			return false
		}
	}
}

// evictOldestIdle closes the connection that has waited longest for its
// next request, unless one closed for room has not yet given its slot back.
func (s *Server) evictOldestIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.evicting > 0 {
		return
	}
	var oldest *srvConn
	var since time.Time
	for c, st := range s.conns {
		if st.phase == waiting && !st.evicted && (oldest == nil || st.since.Before(since)) {
			oldest, since = c, st.since
		}
	}
	if oldest == nil {
		return
	}
	st := s.conns[oldest]
	st.evicted = true
	s.conns[oldest] = st
	s.evicting++
	oldest.nc.Close()
}

func (s *Server) track(c *srvConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = connState{phase: waiting, since: c.accepted}
	return true
}

// untrack forgets c as its goroutine ends.
func (s *Server) untrack(c *srvConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[c].evicted {
		s.evicting--
	}
	delete(s.conns, c)
}

// setPhase records what c is doing; false once Close began.
func (s *Server) setPhase(c *srvConn, p connPhase) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	st := s.conns[c]
	st.phase = p
	switch p {
	case answering:
		st.since = time.Now()
	case waiting:
		select { // wake an accept that waits for an idle connection
		case s.idled <- struct{}{}:
		default:
		}
	}
	s.conns[c] = st
	return true
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) serveConn(c *srvConn) {
	defer func() {
		// net/http recovered a handler's panic too: a bug here must not
		// take the tunnel down with the scrape.
		if r := recover(); r != nil {
			s.logf("metrics: panic answering %v (a bug; its connection is closed): %v\n%s", c.nc.RemoteAddr(), r, debug.Stack())
		}
		c.nc.Close()
		s.untrack(c)
		<-s.slots
		s.wg.Done()
	}()
	c.br = bufio.NewReaderSize(c.nc, 4<<10)
	idleBy := c.accepted.Add(s.cfg.readHeaderTimeout)
	for first := true; ; first = false {
		if err := c.awaitRequest(idleBy); err != nil || !s.setPhase(c, reading) {
			return
		}
		head, err := c.readHead(first, s.cfg.readHeaderTimeout, s.cfg.maxHead)
		if err == nil {
			var req request
			if req, err = parseRequest(head); err == nil {
				if !s.answer(c, &req) {
					return
				}
				idleBy = time.Now().Add(s.cfg.idleTimeout)
				continue
			}
		}
		if errors.Is(err, errHeadTooLarge) || errors.Is(err, errMalformed) || errors.Is(err, errVersion) {
			s.refuse(c, err)
		}
		return // a read error or timeout: nothing to answer
	}
}

// answer serves one request; false when the connection is to close.
func (s *Server) answer(c *srvConn, req *request) bool {
	if !s.setPhase(c, answering) {
		return false
	}
	rep := s.h.serve(req)
	rep.close = req.close || req.hasBody || s.isClosed()
	err := c.write(rep.response, rep.body, s.cfg.writeTimeout)
	rep.release()
	// Done answering: Close may close it from here on.
	if err != nil || !s.setPhase(c, reading) {
		return false
	}
	if req.hasBody {
		c.linger(s.cfg.linger) // the body is not read
	}
	return !rep.close && s.setPhase(c, waiting)
}

// refuse answers a request that cannot be parsed, and closes.
func (s *Server) refuse(c *srvConn, err error) {
	body := []byte(err.Error() + "\n")
	r := response{status: errorStatus(err), contentType: textPlain, bodyLen: len(body), close: true}
	if c.write(r, body, s.cfg.writeTimeout) == nil {
		c.linger(s.cfg.linger)
	}
}

// srvConn is one connection's state, owned by its goroutine.
type srvConn struct {
	nc       net.Conn
	accepted time.Time
	br       *bufio.Reader
	hdr      [256]byte
}

// awaitRequest waits until the next request's first byte is here, or
// idleBy.
func (c *srvConn) awaitRequest(idleBy time.Time) error {
	c.nc.SetReadDeadline(idleBy)
	_, err := c.br.Peek(1)
	return err
}

// readHead returns the request head awaitRequest saw begin, at most limit
// bytes: within headFor of its first byte, or by the deadline awaitRequest
// set on the connection's first request.
func (c *srvConn) readHead(first bool, headFor time.Duration, limit int) ([]byte, error) {
	if !first {
		c.nc.SetReadDeadline(time.Now().Add(headFor))
	}
	head, err := http1.ReadHead(c.br, limit)
	if errors.Is(err, http1.ErrTooLarge) {
		return nil, errHeadTooLarge
	}
	return head, err
}

func (c *srvConn) write(r response, body []byte, timeout time.Duration) error {
	now := time.Now()
	c.nc.SetWriteDeadline(now.Add(timeout))
	bufs := net.Buffers{appendResponse(c.hdr[:0], r, now), body}
	_, err := bufs.WriteTo(c.nc)
	return err
}

// linger stops writing and reads what the client still sends, for a
// moment, before the connection closes: closing with unread input resets
// the connection, which can make the client lose the response it has not
// read yet.
func (c *srvConn) linger(d time.Duration) {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	c.nc.SetReadDeadline(time.Now().Add(d))
	io.CopyN(io.Discard, c.nc, 64<<10)
}
