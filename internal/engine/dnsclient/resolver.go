// Package dnsclient is a stub DNS resolver whose every input is given:
// the name servers, search domains and static names of one tunnel, and a
// dial function that reaches the servers through it. It never reads the
// host's /etc/hosts or resolv.conf, so a name means inside the tunnel
// what the tunnel's configuration says.
//
// A lookup asks the servers in order, each for at most Config.Timeout
// (DefaultTimeout, 2 s) per attempt: a server that does not answer in
// time, answers SERVFAIL, REFUSED or something that does not parse, or
// cannot be reached, passes the question to the next. When a round ends
// without an answer and some server was silent, there is one more round
// (a datagram may have been lost). An answer of
// NXDOMAIN or of no records is authoritative and ends the question. A
// truncated answer is asked again over TCP of the same server. Queries
// carry random IDs, and datagrams that do not answer the question asked
// (another ID or question) are ignored. Nothing is cached.
package dnsclient

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// DefaultTimeout is how long one server is given to answer one query
// (over UDP, and again over TCP when the answer is truncated) before the
// next server is asked.
const DefaultTimeout = 2 * time.Second

// attempts is how many rounds a question may take through the servers
// while some of them stay silent, as resolv.conf's default attempts:2.
const attempts = 2

// ErrNoServers: a name is neither an address nor in Config.Hosts, and
// there is no server to ask.
var ErrNoServers = errors.New("dnsclient: no name server to ask")

// Dialer connects to a name server over network "udp" or "tcp".
type Dialer func(ctx context.Context, network string, server netip.AddrPort) (net.Conn, error)

// Config is what a Resolver knows. The zero value resolves IP literals only.
type Config struct {
	// Servers are asked in order.
	Servers []netip.AddrPort
	// Search are the domains a name without a dot is tried in, in order,
	// before the name itself.
	Search []string
	// Hosts answers before any server: names (ASCII case and a trailing
	// dot ignored) to their addresses. A name found here is never asked
	// of a server, also when it has no address of the family asked.
	Hosts map[string][]netip.Addr
	// Dial reaches the servers; it is required when Servers are given.
	Dial Dialer
	// Timeout is how long a server has to answer (DefaultTimeout if 0).
	Timeout time.Duration
}

// Resolver looks names up as its Config says. It is safe for concurrent
// use and holds no state between lookups.
type Resolver struct {
	servers []netip.AddrPort
	search  []string                // without leading or trailing dots, none empty
	hosts   map[string][]netip.Addr // keys in lower case, without a trailing dot
	dial    Dialer
	timeout time.Duration
}

// New returns a Resolver for c, which it copies.
func New(c Config) *Resolver {
	r := &Resolver{
		servers: append([]netip.AddrPort(nil), c.Servers...),
		hosts:   make(map[string][]netip.Addr, len(c.Hosts)),
		dial:    c.Dial,
		timeout: c.Timeout,
	}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	if r.dial == nil {
		r.dial = func(context.Context, string, netip.AddrPort) (net.Conn, error) {
			return nil, errors.New("dnsclient: no Dial to reach the name servers")
		}
	}
	for _, d := range c.Search {
		if d = strings.Trim(d, "."); d != "" {
			r.search = append(r.search, d)
		}
	}
	for name, addrs := range c.Hosts {
		key := hostKey(name)
		r.hosts[key] = append(r.hosts[key], addrs...)
	}
	return r
}

func hostKey(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// LookupNetIP returns host's addresses of network ("ip", "ip4" or "ip6"):
// an IP address as it is; else the first of its search names (see
// searchNames) found in Hosts; else the first the servers know. For "ip"
// the A and AAAA queries go out together, and IPv4 addresses come first.
// Errors are *net.DNSError, naming host and the server that said so.
func (r *Resolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if network != "ip" && network != "ip4" && network != "ip6" {
		return nil, net.UnknownNetworkError(network)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	names := searchNames(host, r.search)
	for _, name := range names {
		if addrs, ok := r.hosts[hostKey(name)]; ok {
			if got := ofNetwork(network, addrs); len(got) > 0 {
				return got, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
	}
	if !validName(host) {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if len(r.servers) == 0 {
		return nil, &net.DNSError{Err: ErrNoServers.Error(), Name: host, UnwrapErr: ErrNoServers}
	}
	var last *net.DNSError
	for _, name := range names {
		addrs, err := r.lookupName(ctx, network, name)
		if err == nil {
			return addrs, nil
		}
		err.Name = host
		if !err.IsNotFound {
			return nil, err
		}
		last = err
	}
	return nil, last
}

// searchNames is host as the search domains complete it, then host, each
// absolute: a name without a dot is tried in each domain first, as a
// resolv.conf with "search" and the default ndots:1 would have it.
func searchNames(host string, search []string) []string {
	if strings.HasSuffix(host, ".") {
		return []string{host}
	}
	if strings.Contains(host, ".") {
		return []string{host + "."}
	}
	names := make([]string, 0, len(search)+1)
	for _, d := range search {
		names = append(names, host+"."+d+".")
	}
	return append(names, host+".")
}

// validName reports whether host is a name that may be asked: labels of
// 1 to 63 letters, digits, '-' or '_', not starting with '-', at most 253
// bytes without the trailing dot. The search domains are not checked: a
// bad one only makes its names fail to pack, and those are then not found.
func validName(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > 253 {
		return false
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// ofNetwork is the addresses of addrs that network ("ip", "ip4", "ip6")
// takes.
func ofNetwork(network string, addrs []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if network == "ip" || (network == "ip4") == a.Unmap().Is4() {
			out = append(out, a)
		}
	}
	return out
}

// result is one query's outcome.
type result struct {
	addrs []netip.Addr
	err   *net.DNSError
}

// lookupName asks the servers for the absolute name's addresses of
// network. It returns addresses, or an error: not found when every query
// found nothing, else the first other error.
func (r *Resolver) lookupName(ctx context.Context, network, name string) ([]netip.Addr, *net.DNSError) {
	qn, err := dnsmessage.NewName(name)
	if err != nil {
		return nil, &net.DNSError{Err: "no such host", IsNotFound: true}
	}
	var types []dnsmessage.Type
	switch network {
	case "ip4":
		types = []dnsmessage.Type{dnsmessage.TypeA}
	case "ip6":
		types = []dnsmessage.Type{dnsmessage.TypeAAAA}
	default:
		types = []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA}
	}
	results := make([]result, len(types))
	var wg sync.WaitGroup
	for i, typ := range types {
		wg.Go(func() {
			q := dnsmessage.Question{Name: qn, Type: typ, Class: dnsmessage.ClassINET}
			results[i].addrs, results[i].err = r.query(ctx, q)
		})
	}
	wg.Wait()
	return merge(results)
}

// merge is the addresses of all results in order, or when there are none
// the first error that is not "not found", else the first error.
func merge(results []result) ([]netip.Addr, *net.DNSError) {
	var addrs []netip.Addr
	for _, res := range results {
		addrs = append(addrs, res.addrs...)
	}
	if len(addrs) > 0 {
		return addrs, nil
	}
	for _, res := range results {
		if !res.err.IsNotFound {
			return nil, res.err
		}
	}
	return nil, results[0].err
}

// query asks the servers in turn for q until one answers it. It returns
// addresses, or an error naming the last server asked.
func (r *Resolver) query(ctx context.Context, q dnsmessage.Question) ([]netip.Addr, *net.DNSError) {
	var last *net.DNSError
	for round := range attempts {
		timedOut := false
		for _, s := range r.servers {
			ans, err := r.exchange(ctx, s, q)
			switch {
			case ctx.Err() != nil:
				return nil, contextError(ctx.Err(), s)
			case err != nil:
				last = serverError(err, s)
				timedOut = timedOut || last.IsTimeout
			case ans.rcode == dnsmessage.RCodeNameError,
				ans.rcode == dnsmessage.RCodeSuccess && len(ans.addrs) == 0:
				return nil, &net.DNSError{Err: "no such host", Server: s.String(), IsNotFound: true}
			case ans.rcode == dnsmessage.RCodeSuccess:
				return ans.addrs, nil
			default:
				last = &net.DNSError{Err: "server misbehaving", Server: s.String(), IsTemporary: true}
			}
		}
		// Only a round in which some server was silent is worth another:
		// a datagram may have been lost. Failures that answered will
		// answer the same again.
		if !timedOut || round == attempts-1 {
			break
		}
	}
	return nil, last
}

// contextError is the error of a lookup the caller's ctx ended.
func contextError(err error, s netip.AddrPort) *net.DNSError {
	e := &net.DNSError{Err: err.Error(), Server: s.String(), UnwrapErr: err}
	if errors.Is(err, context.DeadlineExceeded) {
		e.Err, e.IsTimeout, e.IsTemporary = "i/o timeout", true, true
	}
	return e
}

// serverError is the error of an exchange with s that failed.
func serverError(err error, s netip.AddrPort) *net.DNSError {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &net.DNSError{Err: "i/o timeout", Server: s.String(), IsTimeout: true, IsTemporary: true}
	case errors.Is(err, errMalformed):
		return &net.DNSError{Err: errMalformed.Error(), Server: s.String(), IsTemporary: true}
	}
	return &net.DNSError{Err: err.Error(), Server: s.String(), IsTemporary: true, UnwrapErr: err}
}

// exchange asks s for q over UDP, and over TCP when the answer is
// truncated, each within r.timeout. Errors: the per-server deadline
// (context.DeadlineExceeded), errMalformed, or the dial's or socket's.
func (r *Resolver) exchange(ctx context.Context, s netip.AddrPort, q dnsmessage.Question) (answer, error) {
	id := uint16(rand.Uint32())
	msg, err := newQuery(id, q)
	if err != nil {
		return answer{}, err
	}
	ans, err := r.roundTrip(ctx, "udp", s, id, q, msg)
	if err != nil || !ans.truncated {
		return ans, err
	}
	ans, err = r.roundTrip(ctx, "tcp", s, id, q, msg)
	if err == nil && ans.truncated {
		return answer{}, errMalformed
	}
	return ans, err
}

// roundTrip sends msg, the query id for q, to s over network and reads
// its answer, within r.timeout.
func (r *Resolver) roundTrip(ctx context.Context, network string, s netip.AddrPort, id uint16, q dnsmessage.Question, msg []byte) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	c, err := r.dial(ctx, network, s)
	if err != nil {
		return answer{}, deadlineErr(ctx, err)
	}
	defer c.Close()
	// Closing the connection is what unblocks a read at the deadline,
	// whatever kind of connection Dial returned.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var ans answer
	if network == "tcp" {
		ans, err = readTCP(c, id, q, msg)
	} else {
		ans, err = readUDP(c, id, q, msg)
	}
	return ans, deadlineErr(ctx, err)
}

// deadlineErr is err, or ctx's when ctx ended: a read on a connection
// closed at the deadline fails with "use of closed" instead.
func deadlineErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readUDP sends msg on c and reads datagrams until one answers it.
func readUDP(c net.Conn, id uint16, q dnsmessage.Question, msg []byte) (answer, error) {
	if _, err := c.Write(msg); err != nil {
		return answer{}, err
	}
	buf := make([]byte, udpBufSize)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return answer{}, err
		}
		ans, err := parseAnswer(buf[:n], id, q)
		if !errors.Is(err, errNotOurs) {
			return ans, err
		}
	}
}

// readTCP sends msg on c with its two-byte length and reads one answer:
// on a stream to the server, anything but the answer is malformed.
func readTCP(c net.Conn, id uint16, q dnsmessage.Question, msg []byte) (answer, error) {
	out := make([]byte, 2+len(msg))
	out[0], out[1] = byte(len(msg)>>8), byte(len(msg))
	copy(out[2:], msg)
	if _, err := c.Write(out); err != nil {
		return answer{}, err
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return answer{}, err
	}
	buf := make([]byte, int(l[0])<<8|int(l[1]))
	if _, err := io.ReadFull(c, buf); err != nil {
		return answer{}, err
	}
	ans, err := parseAnswer(buf, id, q)
	if err != nil {
		return answer{}, errMalformed
	}
	return ans, nil
}
