// Package proxy holds what the rootless proxies and port forwards share: a
// bounded count of connections and a two-way copy that ends idle
// connections.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxConns and DefaultIdleTimeout are the limits a zero option
// means, for every proxy and forward.
const (
	DefaultMaxConns    = 256
	DefaultIdleTimeout = 5 * time.Minute
)

// ErrTooMany is the error of a connection refused because the limit is
// reached.
var ErrTooMany = errors.New("too many connections")

// Limiter bounds the number of connections in use at once.
type Limiter struct {
	slots chan struct{}
}

// NewLimiter allows n at once; n <= 0 means DefaultMaxConns.
func NewLimiter(n int) *Limiter {
	if n <= 0 {
		n = DefaultMaxConns
	}
	return &Limiter{slots: make(chan struct{}, n)}
}

// TryAcquire takes a slot if one is free.
func (l *Limiter) TryAcquire() bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// Release frees a slot taken by TryAcquire.
func (l *Limiter) Release() { <-l.slots }

// Cap is the limit.
func (l *Limiter) Cap() int { return cap(l.slots) }

// Activity records when a connection last moved a byte, for idle timeouts.
type Activity struct{ last atomic.Int64 }

// Touch records activity now.
func (a *Activity) Touch() { a.last.Store(time.Now().UnixNano()) }

// IdleFor is how long since the last Touch.
func (a *Activity) IdleFor(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, a.last.Load()))
}

// CloseWhenIdle calls closeFn once a has been idle for idle or ctx ends,
// or returns when stop is closed.
func CloseWhenIdle(ctx context.Context, a *Activity, idle time.Duration, stop <-chan struct{}, closeFn func()) {
	tick := max(idle/4, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			closeFn()
			return
		case now := <-t.C:
			if a.IdleFor(now) >= idle {
				closeFn()
				return
			}
		}
	}
}

// copyBufSize is the buffer of each direction of a Splice: large enough for
// a 64 KiB segment from either stack in one call.
const copyBufSize = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// Splice copies both ways between a and b until both directions end,
// passing each end of stream on as a half-close, or until neither moved a
// byte for idle (0: DefaultIdleTimeout), or ctx ends (the service is
// shutting down). It closes both and returns the bytes copied a to b and b
// to a.
func Splice(ctx context.Context, a, b net.Conn, idle time.Duration) (ab, ba int64) {
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	var act Activity
	act.Touch()
	stop := make(chan struct{})
	go CloseWhenIdle(ctx, &act, idle, stop, func() { a.Close(); b.Close() })
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ba = copyHalf(a, b, &act)
	}()
	ab = copyHalf(b, a, &act)
	wg.Wait()
	close(stop)
	a.Close()
	b.Close()
	return ab, ba
}

// copyHalf copies src to dst, then half-closes dst (or closes it when it
// cannot half-close).
func copyHalf(dst, src net.Conn, act *Activity) int64 {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var n int64
	for {
		r, rerr := src.Read(buf)
		if r > 0 {
			act.Touch()
			w, werr := dst.Write(buf[:r])
			n += int64(w)
			if werr != nil {
				break
			}
		}
		if rerr != nil {
			break
		}
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return n
		}
	}
	dst.Close()
	src.Close()
	return n
}

// Dialer reaches addresses through the tunnel.
type Dialer interface {
	DialTCPAddrPort(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
}

// Resolver turns a host name into an address through the tunnel.
type Resolver func(ctx context.Context, host string) (netip.Addr, error)

// ResolveHostPort parses "host:port", resolving host with resolve unless it
// is an IP literal (nil resolve: names are an error).
func ResolveHostPort(ctx context.Context, hostport string, resolve Resolver) (netip.AddrPort, error) {
	host, port, err := SplitHostPort(hostport)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return ResolveHost(ctx, host, port, resolve)
}

// ResolveHost resolves host (an IP literal or a name) and pairs it with port.
func ResolveHost(ctx context.Context, host string, port uint16, resolve Resolver) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return netip.AddrPort{}, fmt.Errorf("address %q has a zone", host)
		}
		return netip.AddrPortFrom(a.Unmap(), port), nil
	}
	if resolve == nil {
		return netip.AddrPort{}, fmt.Errorf("cannot resolve %q: no DNS server for the tunnel (set DNS in the config)", host)
	}
	a, err := resolve(ctx, host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(a.Unmap(), port), nil
}

// SplitHostPort splits "host:port" or "[v6]:port" with a numeric port from
// 1 to 65535.
func SplitHostPort(hostport string) (string, uint16, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q has no host", hostport)
	}
	var port int
	for _, c := range ps {
		if c < '0' || c > '9' || port > 65535 {
			return "", 0, fmt.Errorf("%q: bad port", hostport)
		}
		port = port*10 + int(c-'0')
	}
	if port == 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: port out of range", hostport)
	}
	if strings.ContainsAny(host, " \t\r\n/") {
		return "", 0, fmt.Errorf("%q: bad host", hostport)
	}
	return host, uint16(port), nil
}

// LoopbackDefault gives a listen address with no host the loopback host:
// "1080" and ":1080" become "127.0.0.1:1080"; a named host is kept.
func LoopbackDefault(addr string) string {
	if !strings.Contains(addr, ":") {
		return "127.0.0.1:" + addr
	}
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// CloseGently closes c after a refusal or error reply so that the reply
// arrives: it half-closes, drains what the client had sent (up to 64 KiB,
// for at most a second), then closes. Closing with unread input would
// make the kernel reset the connection and the client could lose the
// reply.
func CloseGently(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	c.Close()
}
