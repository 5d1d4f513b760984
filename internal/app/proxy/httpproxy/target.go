// Package httpproxy is an HTTP proxy (CONNECT for TLS and any TCP, and
// plain http:// requests in absolute form) that reaches its targets
// through the tunnel. Parsing is pure: targets (target.go), message heads
// (head.go, header.go) and body framing (body.go); server.go and
// forward.go do the I/O. It does not use net/http, which would link TLS,
// x509 and HTTP/2 into the binary for a plain-text HTTP/1.1 proxy.
package httpproxy

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/fips-go/fips-go/internal/app/proxy"
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
	if method == "CONNECT" {
		host, port, err := proxy.SplitHostPort(requestURI)
		if err != nil {
			return Target{}, fmt.Errorf("%w: CONNECT %q: want host:port: %v", ErrBadTarget, requestURI, err)
		}
		return Target{Host: host, Port: port}, nil
	}
	t, _, err := parseAbsolute(requestURI)
	return t, err
}

// parseAbsolute parses an absolute http:// URL into its target and its
// authority without user information, which is the Host field a proxy
// sends on (RFC 9112 section 3.2.2).
func parseAbsolute(requestURI string) (Target, string, error) {
	u, err := url.Parse(requestURI)
	if err != nil {
		return Target{}, "", fmt.Errorf("%w: %q: %v", ErrBadTarget, requestURI, err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return Target{}, "", fmt.Errorf("%w: %q is not an absolute http:// URL (this is a proxy; https goes through CONNECT)", ErrBadTarget, requestURI)
	}
	hp := u.Host
	if u.Port() == "" {
		hp = strings.TrimSuffix(hp, ":") + ":80"
		if strings.Count(u.Host, ":") > 1 && !strings.HasPrefix(u.Host, "[") {
			return Target{}, "", fmt.Errorf("%w: %q: IPv6 host without brackets", ErrBadTarget, requestURI)
		}
	}
	host, port, err := proxy.SplitHostPort(hp)
	if err != nil {
		return Target{}, "", fmt.Errorf("%w: %q: %v", ErrBadTarget, requestURI, err)
	}
	return Target{Host: host, Port: port}, u.Host, nil
}

// originForm is the request-target to send the origin for an absolute
// URL: its path and query, "/" for an empty path, without the fragment
// (RFC 9112 section 3.2.1). It keeps the client's bytes, where a
// url.URL round trip could re-escape them.
func originForm(absolute string) string {
	_, rest, _ := strings.Cut(absolute, "://")
	i := strings.IndexAny(rest, "/?#")
	if i < 0 {
		return "/"
	}
	rest, _, _ = strings.Cut(rest[i:], "#")
	switch {
	case rest == "":
		return "/"
	case rest[0] == '?':
		return "/" + rest
	}
	return rest
}

// hopByHop are the fields of one connection (RFC 9110 section 7.6.1),
// which a proxy must not forward.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// RemoveHopByHop deletes the hop-by-hop fields from h, including those
// the Connection field names.
func RemoveHopByHop(h *Header) {
	var named []string
	h.EachToken("Connection", func(t string) { named = append(named, t) })
	for _, f := range named {
		h.Del(f)
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
}
