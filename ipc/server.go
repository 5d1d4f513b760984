package ipc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/fips-go/fips-go/device"
)

// Handler is the device as the UAPI server sees it. Both methods may be
// called concurrently from several connections. A Handler that is also a
// NamesHandler answers fips-go's get/set=fipsnames; one with a
// Sandbox() string method, get=fipssandbox.
type Handler interface {
	// Apply applies cfg atomically: all of it or, when it returns an error,
	// none of it. The error's errno (see ErrnoOf) goes back to the client.
	Apply(cfg *device.Config) error
	// Status returns a snapshot for get=1 and get=fips.
	Status() device.Status
}

// ServeOptions tune Serve. The zero value works.
type ServeOptions struct {
	// MaxRequest bounds one set request in bytes (default DefaultMaxRequest).
	// A larger request is refused with -EMSGSIZE and its connection closed,
	// having buffered no more than a line of it.
	MaxRequest int
	// MaxClients bounds the connections served at once (default 64); more
	// wait in the socket's backlog.
	MaxClients int
	// Timeout bounds how long a connection may sit idle between requests,
	// how long one request may take to arrive, and how long a reply may
	// take to be read (default 30s), so a stuck client cannot hold a slot.
	Timeout time.Duration
	// Logf receives one line per refused request or failed connection; nil
	// discards.
	Logf func(format string, args ...any)
}

const (
	defaultMaxClients = 64
	defaultTimeout    = 30 * time.Second
)

func (o ServeOptions) withDefaults() (ServeOptions, error) {
	if o.MaxRequest < 0 || o.MaxClients < 0 || o.Timeout < 0 {
		return o, fmt.Errorf("ipc: negative ServeOptions value: %+v", o)
	}
	if o.MaxRequest == 0 {
		o.MaxRequest = DefaultMaxRequest
	}
	if o.MaxClients == 0 {
		o.MaxClients = defaultMaxClients
	}
	if o.Timeout == 0 {
		o.Timeout = defaultTimeout
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o, nil
}

// Serve answers UAPI requests with h until Close, serving each connection in
// its own goroutine; a connection may carry any number of requests in turn.
// It returns nil after Close (also when Close came first), once every
// connection goroutine has finished.
func (l *Listener) Serve(h Handler, opts ServeOptions) error {
	if h == nil {
		return errors.New("ipc: Serve with a nil Handler")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	if l.serving {
		l.mu.Unlock()
		return errors.New("ipc: Serve called twice")
	}
	l.serving = true
	l.mu.Unlock()
	defer l.wg.Wait()

	slots := make(chan struct{}, opts.MaxClients)
	backoff := time.Duration(0)
	for {
		slots <- struct{}{} // a slot frees as a connection ends
		c, err := l.ln.AcceptUnix()
		if err != nil {
			<-slots
			if l.isClosed() {
				return nil
			}
			// Out of descriptors and the like: wait and retry, as net/http
			// does, rather than spinning or giving up on the interface.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			opts.Logf("uapi: accept: %v; retrying in %v", err, backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if !l.track(c) {
			c.Close()
			<-slots
			return nil
		}
		go func() {
			defer l.wg.Done()
			defer func() { <-slots }()
			defer l.untrack(c)
			serveConn(c, h, opts)
		}()
	}
}

func (l *Listener) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// track registers c so Close can end it; false means Close already ran.
func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = struct{}{}
	l.wg.Add(1)
	return true
}

func (l *Listener) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	c.Close()
}

// serveConn answers requests on c until the client goes away, a deadline
// passes, or the stream can no longer be trusted to be in step.
func serveConn(c net.Conn, h Handler, opts ServeOptions) {
	br := bufio.NewReaderSize(c, MaxLine)
	var reply bytes.Buffer
	for {
		c.SetReadDeadline(time.Now().Add(opts.Timeout))
		op, err := newLineReader(br, MaxLine).next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				opts.Logf("uapi: reading request: %v", err)
			}
			return
		}
		// The request as a whole gets its own deadline, idle time excluded.
		c.SetReadDeadline(time.Now().Add(opts.Timeout))
		reply.Reset()
		keep := handleRequest(&reply, br, string(op), h, opts)
		c.SetWriteDeadline(time.Now().Add(opts.Timeout))
		if _, err := c.Write(reply.Bytes()); err != nil {
			opts.Logf("uapi: writing reply: %v", err)
			return
		}
		if !keep {
			return
		}
		if reply.Cap() > 1<<20 {
			reply = bytes.Buffer{} // don't pin a large get reply per idle client
		}
	}
}

// handleRequest writes the reply to one request into reply and reports
// whether the connection is still in step for another request.
func handleRequest(reply *bytes.Buffer, br *bufio.Reader, op string, h Handler, opts ServeOptions) bool {
	switch op {
	case "set=1":
		cfg, inSync, err := parseSet(br, opts.MaxRequest)
		if err == nil {
			err = h.Apply(cfg)
		}
		if err != nil {
			opts.Logf("uapi: set refused: %v", err)
		}
		writeErrno(reply, ErrnoOf(err))
		return inSync
	case "set=fipsnames", "get=fipsnames":
		return handleNames(reply, br, op, h, opts)
	case "get=fipssandbox":
		return handleSandbox(reply, br, h)
	case "get=1", "get=fips":
		end, err := newLineReader(br, MaxLine).next()
		if err != nil || len(end) != 0 {
			opts.Logf("uapi: %s not followed by an empty line", op)
			writeErrno(reply, ErrnoInvalid)
			return false
		}
		st := h.Status()
		if op == "get=1" {
			err = WriteGet(reply, st)
		} else {
			err = WriteCounters(reply, st.Counters)
			if err == nil {
				err = writePeerPaths(reply, st.Peers)
			}
		}
		if err != nil {
			opts.Logf("uapi: %s: %v", op, err)
			reply.Reset()
			writeErrno(reply, ErrnoIO)
			return true
		}
		writeErrno(reply, 0)
		return true
	}
	opts.Logf("uapi: unknown operation %q", truncate([]byte(op)))
	writeErrno(reply, ErrnoInvalid)
	return false
}

func writeErrno(b *bytes.Buffer, errno int64) {
	b.WriteString("errno=")
	b.WriteString(strconv.FormatInt(errno, 10))
	b.WriteString("\n\n")
}

// handleNames serves fips-go's endpoint-name requests (see names.go).
func handleNames(reply *bytes.Buffer, br *bufio.Reader, op string, h Handler, opts ServeOptions) bool {
	nh, ok := h.(NamesHandler)
	if op == "get=fipsnames" {
		end, err := newLineReader(br, MaxLine).next()
		if err != nil || len(end) != 0 || !ok {
			writeErrno(reply, ErrnoInvalid)
			return err == nil && len(end) == 0
		}
		writeNames(reply, nh.EndpointNames())
		writeErrno(reply, 0)
		return true
	}
	names, replace, inSync, err := parseNames(br, opts.MaxRequest)
	if err == nil && !ok {
		err = errorf(ErrnoInvalid, "this device keeps no endpoint names")
	}
	if err == nil {
		err = nh.SetEndpointNames(names, replace)
	}
	if err != nil {
		opts.Logf("uapi: set=fipsnames refused: %v", err)
	}
	writeErrno(reply, ErrnoOf(err))
	return inSync
}
