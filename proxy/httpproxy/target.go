// Package httpproxy is an HTTP proxy (CONNECT for TLS and any TCP, and
// plain http:// requests in absolute form) that reaches its targets
// through the tunnel. Target parsing is pure (target.go); server.go does
// the I/O on top of net/http's request parser.
package httpproxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/fips-go/fips-go/proxy"
)

// ErrBadTarget is wrapped by the errors of requests that name no usable
// target.
var ErrBadTarget = errors.New("httpproxy: bad target")

// Target is where a proxy request goes: a host (a name or an IP literal,
// without brackets) and a port.
type Target struct {
	Host string
	Port uint16
}

func (t Target) String() string {
	if strings.Contains(t.Host, ":") {
		return fmt.Sprintf("[%s]:%d", t.Host, t.Port)
	}
	return fmt.Sprintf("%s:%d", t.Host, t.Port)
}

// ParseTarget finds the target of a request from its method and
// request-target (RFC 9112 section 3.2): CONNECT takes an authority with
// a port; every other method an absolute http:// URL, port 80 by default.
func ParseTarget(method, requestURI string) (Target, error) {
	if method == http.MethodConnect {
		host, port, err := proxy.SplitHostPort(requestURI)
		if err != nil {
			return Target{}, fmt.Errorf("%w: CONNECT %q: want host:port: %v", ErrBadTarget, requestURI, err)
		}
		return Target{Host: host, Port: port}, nil
	}
	u, err := url.Parse(requestURI)
	if err != nil {
		return Target{}, fmt.Errorf("%w: %q: %v", ErrBadTarget, requestURI, err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return Target{}, fmt.Errorf("%w: %q is not an absolute http:// URL (this is a proxy; https goes through CONNECT)", ErrBadTarget, requestURI)
	}
	hp := u.Host
	if u.Port() == "" {
		hp = strings.TrimSuffix(hp, ":") + ":80"
		if strings.Count(u.Host, ":") > 1 && !strings.HasPrefix(u.Host, "[") {
			return Target{}, fmt.Errorf("%w: %q: IPv6 host without brackets", ErrBadTarget, requestURI)
		}
	}
	host, port, err := proxy.SplitHostPort(hp)
	if err != nil {
		return Target{}, fmt.Errorf("%w: %q: %v", ErrBadTarget, requestURI, err)
	}
	return Target{Host: host, Port: port}, nil
}

// hopByHop are the headers of one connection (RFC 9110 section 7.6.1),
// which a proxy must not forward.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// RemoveHopByHop deletes the hop-by-hop headers from h, including those
// the Connection header names.
func RemoveHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
}
