package conn

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"time"
)

// Streams through an HTTP CONNECT proxy, the way out of networks where
// TCP leaves only through one: the Stream connects to the proxy, asks it
// for a tunnel to the endpoint (CONNECT ip:port HTTP/1.1, with
// Proxy-Authorization: Basic when the proxy URL has credentials), and
// frames on the tunnel as on a direct connection, plain or TLS.

// ErrProxy is wrapped by ParseProxy's errors and by a dial whose proxy
// refused or answered something that is not HTTP.
var ErrProxy = errors.New("conn: HTTP proxy")

// maxProxyResponse bounds the proxy's response header: a proxy that sends
// more before its blank line is not one this code talks to.
const maxProxyResponse = 4096

// ParseProxy parses an HTTP proxy URL, http://[user:password@]host[:port]
// (port 80 when absent); the error wraps ErrProxy. Only http: the
// connection to the proxy is plain, as it is for HTTPS_PROXY=http://...
// in other programs.
func ParseProxy(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w URL: %w", ErrProxy, err)
	}
	if u.Scheme != "http" || u.Host == "" || u.Opaque != "" || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return nil, fmt.Errorf("%w URL %.80q: want http://[user:password@]host[:port]", ErrProxy, u.Redacted())
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return nil, fmt.Errorf("%w URL %.80q: bad port", ErrProxy, u.Redacted())
	}
	u.Host = net.JoinHostPort(u.Hostname(), port)
	u.Path = ""
	return u, nil
}

// SetProxy makes connections dialed from now on go through the HTTP
// CONNECT proxy p (from ParseProxy); nil dials directly. Connections
// already open keep their way.
func (s *Stream) SetProxy(p *url.URL) {
	s.mu.Lock()
	s.proxy = p
	s.mu.Unlock()
}

// dialVia connects to dst, directly or through proxy.
func (s *Stream) dialVia(ctx context.Context, proxy *url.URL, dst netip.AddrPort, mark uint32) (net.Conn, error) {
	if proxy == nil {
		return s.opts.dial(ctx, dst, mark)
	}
	d := net.Dialer{Control: markControl(mark)}
	nc, err := d.DialContext(ctx, "tcp", proxy.Host)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrProxy, proxy.Host, err)
	}
	// The context's end (timeout or Close) ends the exchange below.
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	c, err := proxyConnect(nc, proxy, dst)
	if !stop() || err != nil {
		nc.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, err
	}
	return c, nil
}

// proxyConnect asks the proxy on nc for a tunnel to dst and returns the
// connection to use (holding any bytes the proxy sent past its header).
func proxyConnect(nc net.Conn, proxy *url.URL, dst netip.AddrPort) (net.Conn, error) {
	target := dst.String()
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if u := proxy.User; u != nil {
		pass, _ := u.Password()
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pass)) + "\r\n"
	}
	if _, err := nc.Write([]byte(req + "\r\n")); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrProxy, proxy.Host, err)
	}
	buf := make([]byte, maxProxyResponse)
	have := 0
	for {
		n, err := nc.Read(buf[have:])
		have += n
		hl, perr := parseConnectResponse(buf[:have])
		switch {
		case perr == nil:
			if hl == have {
				return nc, nil
			}
			return &prefixConn{Conn: nc, pre: buf[hl:have]}, nil
		case !errors.Is(perr, errProxyIncomplete):
			return nil, fmt.Errorf("%s: %w", proxy.Host, perr)
		case err != nil:
			return nil, fmt.Errorf("%w %s: response: %w", ErrProxy, proxy.Host, err)
		case have == len(buf):
			return nil, fmt.Errorf("%w %s: response header over %d bytes", ErrProxy, proxy.Host, maxProxyResponse)
		}
	}
}

var errProxyIncomplete = errors.New("conn: proxy response incomplete")

// parseConnectResponse reads a proxy's answer to CONNECT: a status line
// "HTTP/1.x NNN reason", header lines, a blank line (CRLF or bare LF). It
// returns the header's length when the status is 2xx, errProxyIncomplete
// while the blank line has not arrived, and an error wrapping ErrProxy
// for anything else. It looks at no more than maxProxyResponse bytes.
func parseConnectResponse(b []byte) (int, error) {
	if len(b) > maxProxyResponse {
		b = b[:maxProxyResponse]
	}
	const proto = "HTTP/1."
	if n := min(len(b), len(proto)); !bytes.Equal(b[:n], []byte(proto)[:n]) {
		return 0, fmt.Errorf("%w: not an HTTP response: %.32q", ErrProxy, b)
	}
	end := -1
	for _, sep := range []string{"\r\n\r\n", "\n\n", "\n\r\n"} {
		if i := bytes.Index(b, []byte(sep)); i >= 0 && (end < 0 || i+len(sep) < end) {
			end = i + len(sep)
		}
	}
	if end < 0 {
		if len(b) == maxProxyResponse {
			return 0, fmt.Errorf("%w: response header over %d bytes", ErrProxy, maxProxyResponse)
		}
		return 0, errProxyIncomplete
	}
	line, _, _ := bytes.Cut(b[:end], []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	// "HTTP/1.1 200 Connection established": version, space, 3 digits,
	// then a space or the end of the line.
	if len(line) < 12 || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return 0, fmt.Errorf("%w: bad status line %.64q", ErrProxy, line)
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil || code < 100 {
		return 0, fmt.Errorf("%w: bad status line %.64q", ErrProxy, line)
	}
	if code/100 != 2 {
		return 0, fmt.Errorf("%w refused the tunnel: %.64q", ErrProxy, line)
	}
	return end, nil
}
