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

	"github.com/fips-go/fips-go/internal/app/connslots"
	"github.com/fips-go/fips-go/internal/app/http1"
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
	slots *connslots.Slots // a slot per open connection; idle while it waits for a request
	done  chan struct{}    // closed by Close
	wg    sync.WaitGroup   // the accept loop and every connection's goroutine
	once  sync.Once        // Close's work

	mu     sync.Mutex
	closed bool              // guarded by mu
	conns  map[*srvConn]bool // guarded by mu; true while answering a request
}

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
		slots: connslots.New(cfg.maxConns),
		done:  make(chan struct{}),
		conns: map[*srvConn]bool{},
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
	for c, busy := range s.conns {
		if all || !busy {
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
		slot, ok := s.takeSlot(nc)
		if !ok {
			nc.Close()
			return
		}
		c := &srvConn{nc: nc, slot: slot, accepted: time.Now()}
		if !s.track(c) {
			nc.Close()
			slot.Release()
			return
		}
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

// takeSlot takes a slot for nc, just accepted: at the cap the slot of
// the connection idle longest, closing it; with every one answering or
// reading a request, it waits until one is not. False when Close began.
func (s *Server) takeSlot(nc net.Conn) (*connslots.Slot, bool) {
	for {
		if slot, ok := s.slots.Acquire(func() { nc.Close() }); ok {
			return slot, true
		}
		select {
		case <-s.slots.Freed():
		case <-s.done:
			return nil, false
		}
	}
}

func (s *Server) track(c *srvConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = false
	return true
}

// setBusy marks c as answering a request or not; false once Close began.
func (s *Server) setBusy(c *srvConn, busy bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = busy
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
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.nc.Close()
		c.slot.Release()
		s.wg.Done()
	}()
	c.br = bufio.NewReaderSize(c.nc, 4<<10)
	idleBy := c.accepted.Add(s.cfg.readHeaderTimeout)
	for first := true; ; first = false {
		// Closed to make room for another connection if Busy fails.
		if err := c.awaitRequest(idleBy); err != nil || !c.slot.Busy() {
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
	if !s.setBusy(c, true) {
		return false
	}
	rep := s.h.serve(req)
	rep.close = req.close || req.hasBody || s.isClosed()
	err := c.write(rep.response, rep.body, s.cfg.writeTimeout)
	rep.release()
	if err != nil || !s.setBusy(c, false) {
		return false
	}
	if req.hasBody {
		c.linger(s.cfg.linger) // the body is not read
	}
	if rep.close {
		return false
	}
	c.slot.Idle()
	return true
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
	slot     *connslots.Slot
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
