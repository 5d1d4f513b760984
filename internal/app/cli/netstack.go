package cli

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/fips-go/fips-go/internal/app/proxy"
	"github.com/fips-go/fips-go/internal/app/rootless"
)

// The flags of the netstack modes of `fips-go userspace`; the services
// themselves are package rootless.

// cutProto takes the tcp: or udp: prefix of a forward's argument off (no
// prefix: tcp).
func cutProto(s string) (udp bool, rest string) {
	if v, ok := strings.CutPrefix(s, "udp:"); ok {
		return true, v
	}
	return false, strings.TrimPrefix(s, "tcp:")
}

// parseForward reads -L [tcp:|udp:][LOCAL=]REMOTE; a LOCAL without a host
// is on loopback, and no LOCAL means REMOTE's port on loopback.
func parseForward(s string) (rootless.Forward, error) {
	var f rootless.Forward
	var rest string
	f.UDP, rest = cutProto(s)
	local, remote, ok := strings.Cut(rest, "=")
	if !ok {
		local, remote = "", rest
	}
	ap, err := netip.ParseAddrPort(remote)
	if err != nil || ap.Port() == 0 {
		return f, fmt.Errorf("-L %q: want [tcp:|udp:][LOCAL=]REMOTE with REMOTE an ip:port, e.g. udp:127.0.0.1:5353=10.0.0.1:53", s)
	}
	if local == "" {
		local = strconv.Itoa(int(ap.Port()))
	}
	f.Local, f.Remote = proxy.LoopbackDefault(local), ap
	return f, nil
}

// parseReverse reads -R REMOTE_PORT=LOCAL.
func parseReverse(s string) (rootless.Reverse, error) {
	var r rootless.Reverse
	var rest string
	r.UDP, rest = cutProto(s)
	port, local, ok := strings.Cut(rest, "=")
	p, err := strconv.ParseUint(port, 10, 16)
	if !ok || err != nil || p == 0 || local == "" {
		return rootless.Reverse{}, fmt.Errorf("-R %q: want [tcp:|udp:]REMOTE_PORT=LOCAL, e.g. 8080=127.0.0.1:80", s)
	}
	r.Port, r.Local = uint16(p), proxy.LoopbackDefault(local)
	return r, nil
}
