package dnsclient

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// handler answers one query (without TCP's length prefix) that arrived
// over network with the messages it returns, none for a silent server.
type handler func(network string, query []byte) [][]byte

// fakeNet is a set of name servers reached without sockets; it records
// every query in order, as "network server type name".
type fakeNet struct {
	servers map[netip.AddrPort]handler // absent: the dial fails

	mu    sync.Mutex
	asked []string
}

func (f *fakeNet) dial(_ context.Context, network string, s netip.AddrPort) (net.Conn, error) {
	h, ok := f.servers[s]
	if !ok {
		return nil, fmt.Errorf("dial %s %v: no route", network, s)
	}
	return &fakeConn{network: network, server: s, net: f, h: h, in: make(chan []byte, 16), done: make(chan struct{})}, nil
}

func (f *fakeNet) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// fakeConn is one connection to a fake server: a datagram socket for
// "udp", a stream with DNS's two-byte length prefix for "tcp". Close
// unblocks Read, as it does on a real socket.
type fakeConn struct {
	network string
	server  netip.AddrPort
	net     *fakeNet
	h       handler
	in      chan []byte
	done    chan struct{}
	once    sync.Once
	pending []byte // the rest of a TCP message being read
}

func (c *fakeConn) Write(b []byte) (int, error) {
	select {
	case <-c.done:
		return 0, net.ErrClosed
	default:
	}
	q := b
	if c.network == "tcp" {
		q = b[2:]
	}
	var p dnsmessage.Parser
	if _, err := p.Start(q); err == nil {
		if qq, err := p.Question(); err == nil {
			c.net.mu.Lock()
			c.net.asked = append(c.net.asked, fmt.Sprintf("%s %v %v %v", c.network, c.server, qq.Type, qq.Name))
			c.net.mu.Unlock()
		}
	}
	for _, m := range c.h(c.network, q) {
		if c.network == "tcp" {
			m = append([]byte{byte(len(m) >> 8), byte(len(m))}, m...)
		}
		c.in <- m
	}
	return len(b), nil
}

func (c *fakeConn) Read(b []byte) (int, error) {
	if len(c.pending) == 0 {
		select {
		case c.pending = <-c.in:
		case <-c.done:
			return 0, net.ErrClosed
		}
	}
	n := copy(b, c.pending)
	c.pending = c.pending[n:]
	if c.network == "udp" {
		c.pending = nil
	}
	return n, nil
}

func (c *fakeConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}

func (c *fakeConn) LocalAddr() net.Addr              { return &net.UDPAddr{} }
func (c *fakeConn) RemoteAddr() net.Addr             { return net.UDPAddrFromAddrPort(c.server) }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }

var _ net.Conn = (*fakeConn)(nil)

// zone is a handler for a server that knows names: A and AAAA records
// by absolute lower-case name, a name absent is NXDOMAIN, a known name
// without records of the type asked is an empty answer.
func zone(names map[string][]netip.Addr) handler {
	return func(_ string, query []byte) [][]byte {
		var p dnsmessage.Parser
		h, err := p.Start(query)
		if err != nil {
			return nil
		}
		q, err := p.Question()
		if err != nil {
			return nil
		}
		addrs, ok := names[q.Name.String()]
		if !ok {
			return [][]byte{reply(h.ID, q, dnsmessage.RCodeNameError, false)}
		}
		return [][]byte{reply(h.ID, q, dnsmessage.RCodeSuccess, false, addrs...)}
	}
}

// reply is an answer with id to q, with rcode, the TC bit if truncated,
// and the records of addrs that q's type asks for.
func reply(id uint16, q dnsmessage.Question, rcode dnsmessage.RCode, truncated bool, addrs ...netip.Addr) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, Response: true, RCode: rcode, Truncated: truncated, RecursionAvailable: true})
	b.EnableCompression()
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}
	for _, a := range addrs {
		switch {
		case a.Is4() && q.Type == dnsmessage.TypeA:
			b.AResource(rh, dnsmessage.AResource{A: a.As4()})
		case a.Is6() && q.Type == dnsmessage.TypeAAAA:
			b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
	}
	m, err := b.Finish()
	if err != nil {
		panic(err)
	}
	return m
}

// queryOf is the ID and question of a query.
func queryOf(query []byte) (uint16, dnsmessage.Question, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return 0, dnsmessage.Question{}, false
	}
	q, err := p.Question()
	return h.ID, q, err == nil
}
