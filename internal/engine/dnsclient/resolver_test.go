package dnsclient

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

var (
	s1 = netip.MustParseAddrPort("10.0.0.9:53")
	s2 = netip.MustParseAddrPort("10.0.0.1:53")

	web4 = netip.MustParseAddr("10.0.0.80")
	web6 = netip.MustParseAddr("fd00::80")

	webZone = zone(map[string][]netip.Addr{"web.internal.": {web4, web6}, "v4only.internal.": {web4}})
)

func silent(string, []byte) [][]byte { return nil }

// rcodeOnly answers every query with rcode and no records.
func rcodeOnly(rcode dnsmessage.RCode) handler {
	return func(_ string, query []byte) [][]byte {
		id, q, ok := queryOf(query)
		if !ok {
			return nil
		}
		return [][]byte{reply(id, q, rcode, false)}
	}
}

func newResolver(f *fakeNet, c Config) *Resolver {
	c.Dial = f.dial
	return New(c)
}

func wantNotFound(t *testing.T, err error, server string) {
	t.Helper()
	var e *net.DNSError
	if !errors.As(err, &e) || !e.IsNotFound || e.IsTimeout || e.Server != server {
		t.Fatalf("got %#v, want not found from %q", err, server)
	}
}

// A silent first server costs exactly one timeout; the second answers.
// So does one that cannot be reached, at no cost.
func TestNextServerOnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNet{servers: map[netip.AddrPort]handler{s1: silent, s2: webZone}}
		r := newResolver(f, Config{Servers: []netip.AddrPort{s1, s2}})
		start := time.Now()
		got, err := r.LookupNetIP(context.Background(), "ip4", "web.internal")
		if err != nil || !slices.Equal(got, []netip.Addr{web4}) {
			t.Fatalf("got %v, %v", got, err)
		}
		if d := time.Since(start); d != DefaultTimeout {
			t.Fatalf("took %v, want one timeout (%v)", d, DefaultTimeout)
		}
		unreachable := netip.MustParseAddrPort("10.0.0.7:53")
		r = newResolver(f, Config{Servers: []netip.AddrPort{unreachable, s2}, Timeout: time.Second})
		start = time.Now()
		if got, err := r.LookupNetIP(context.Background(), "ip", "web.internal"); err != nil || !slices.Equal(got, []netip.Addr{web4, web6}) {
			t.Fatalf("unreachable first: got %v, %v", got, err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("an unreachable server cost %v", d)
		}
	})
}

// Every server silent: a timeout error naming the last one, after two
// rounds of one timeout each, also for "ip", whose two queries go out
// together.
func TestAllSilent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNet{servers: map[netip.AddrPort]handler{s1: silent, s2: silent}}
		r := newResolver(f, Config{Servers: []netip.AddrPort{s1, s2}})
		start := time.Now()
		_, err := r.LookupNetIP(context.Background(), "ip", "web.internal")
		var e *net.DNSError
		if !errors.As(err, &e) || !e.IsTimeout || e.IsNotFound || e.Server != s2.String() || e.Name != "web.internal" {
			t.Fatalf("got %#v, want a timeout from %v", err, s2)
		}
		if d := time.Since(start); d != 2*attempts*DefaultTimeout {
			t.Fatalf("took %v, want %v", d, 2*attempts*DefaultTimeout)
		}
		if n := len(f.log()); n != 4*attempts {
			t.Fatalf("%d queries, want A and AAAA to each server in each round: %q", n, f.log())
		}
	})
}

// SERVFAIL, REFUSED and an answer that does not parse pass the question
// on; NXDOMAIN and an empty answer end it.
func TestServerPolicy(t *testing.T) {
	garbled := func(_ string, query []byte) [][]byte {
		id, q, _ := queryOf(query)
		m := reply(id, q, dnsmessage.RCodeSuccess, false, web4)
		return [][]byte{m[:len(m)-2]} // the A record cut short
	}
	for _, tc := range []struct {
		name   string
		first  handler
		passes bool
	}{
		{"SERVFAIL", rcodeOnly(dnsmessage.RCodeServerFailure), true},
		{"REFUSED", rcodeOnly(dnsmessage.RCodeRefused), true},
		{"malformed", garbled, true},
		{"NXDOMAIN", rcodeOnly(dnsmessage.RCodeNameError), false},
		{"no records", rcodeOnly(dnsmessage.RCodeSuccess), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeNet{servers: map[netip.AddrPort]handler{s1: tc.first, s2: webZone}}
			r := newResolver(f, Config{Servers: []netip.AddrPort{s1, s2}})
			got, err := r.LookupNetIP(context.Background(), "ip4", "web.internal")
			if tc.passes {
				if err != nil || !slices.Equal(got, []netip.Addr{web4}) {
					t.Fatalf("got %v, %v; want the second server's answer", got, err)
				}
				return
			}
			wantNotFound(t, err, s1.String())
			if log := f.log(); len(log) != 1 {
				t.Fatalf("asked %q, want only the first server", log)
			}
		})
	}
}

// The second server's SERVFAIL after a silent first: the error is the
// last server's, not a timeout.
func TestLastServerNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNet{servers: map[netip.AddrPort]handler{s1: silent, s2: rcodeOnly(dnsmessage.RCodeServerFailure)}}
		r := newResolver(f, Config{Servers: []netip.AddrPort{s1, s2}})
		_, err := r.LookupNetIP(context.Background(), "ip6", "web.internal")
		var e *net.DNSError
		if !errors.As(err, &e) || e.IsTimeout || e.IsNotFound || !e.IsTemporary || e.Server != s2.String() {
			t.Fatalf("got %#v", err)
		}
	})
}

// Datagrams that answer another ID or question, or are not responses,
// are ignored; the real answer after them counts.
func TestStrayDatagramsIgnored(t *testing.T) {
	f := &fakeNet{servers: map[netip.AddrPort]handler{s1: func(_ string, query []byte) [][]byte {
		id, q, _ := queryOf(query)
		other := q
		other.Name = dnsmessage.MustNewName("evil.internal.")
		notResponse := reply(id, q, dnsmessage.RCodeSuccess, false, netip.MustParseAddr("6.6.6.3"))
		notResponse[2] &^= 0x80 // QR
		return [][]byte{
			reply(id+1, q, dnsmessage.RCodeSuccess, false, netip.MustParseAddr("6.6.6.1")),
			reply(id, other, dnsmessage.RCodeSuccess, false, netip.MustParseAddr("6.6.6.2")),
			notResponse,
			[]byte("junk"),
			reply(id, q, dnsmessage.RCodeSuccess, false, web4),
		}
	}}}
	r := newResolver(f, Config{Servers: []netip.AddrPort{s1}})
	got, err := r.LookupNetIP(context.Background(), "ip4", "web.internal")
	if err != nil || !slices.Equal(got, []netip.Addr{web4}) {
		t.Fatalf("got %v, %v", got, err)
	}
}

// A truncated answer is asked again over TCP of the same server.
func TestTruncatedRetriesTCP(t *testing.T) {
	f := &fakeNet{servers: map[netip.AddrPort]handler{s1: func(network string, query []byte) [][]byte {
		id, q, _ := queryOf(query)
		if network == "udp" {
			return [][]byte{reply(id, q, dnsmessage.RCodeSuccess, true)}
		}
		return [][]byte{reply(id, q, dnsmessage.RCodeSuccess, false, web4)}
	}}}
	r := newResolver(f, Config{Servers: []netip.AddrPort{s1}})
	got, err := r.LookupNetIP(context.Background(), "ip4", "web.internal")
	if err != nil || !slices.Equal(got, []netip.Addr{web4}) {
		t.Fatalf("got %v, %v", got, err)
	}
	want := []string{"udp 10.0.0.9:53 TypeA web.internal.", "tcp 10.0.0.9:53 TypeA web.internal."}
	if log := f.log(); !slices.Equal(log, want) {
		t.Fatalf("asked %q, want %q", log, want)
	}
}

// A name without a dot is tried in each search domain, then alone; a
// name with a dot is asked as it is; the error names what was asked.
func TestSearchOrder(t *testing.T) {
	f := &fakeNet{servers: map[netip.AddrPort]handler{s1: zone(map[string][]netip.Addr{"web.": {web4}})}}
	r := newResolver(f, Config{Servers: []netip.AddrPort{s1}, Search: []string{"a.internal", ".b.internal."}})
	got, err := r.LookupNetIP(context.Background(), "ip4", "web")
	if err != nil || !slices.Equal(got, []netip.Addr{web4}) {
		t.Fatalf("got %v, %v", got, err)
	}
	want := []string{"udp 10.0.0.9:53 TypeA web.a.internal.", "udp 10.0.0.9:53 TypeA web.b.internal.", "udp 10.0.0.9:53 TypeA web."}
	if log := f.log(); !slices.Equal(log, want) {
		t.Fatalf("asked %q, want %q", log, want)
	}
	_, err = r.LookupNetIP(context.Background(), "ip4", "nope.internal")
	wantNotFound(t, err, s1.String())
	if e := err.(*net.DNSError); e.Name != "nope.internal" {
		t.Fatalf("error names %q", e.Name)
	}
	if log := f.log(); log[len(log)-1] != "udp 10.0.0.9:53 TypeA nope.internal." || len(log) != 4 {
		t.Fatalf("a dotted name was searched: %q", log)
	}
}

// A timeout in one search name ends the lookup: the other names would
// only wait as long again.
func TestSearchStopsOnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNet{servers: map[netip.AddrPort]handler{s1: silent}}
		r := newResolver(f, Config{Servers: []netip.AddrPort{s1}, Search: []string{"a", "b"}})
		_, err := r.LookupNetIP(context.Background(), "ip4", "web")
		if e, ok := err.(*net.DNSError); !ok || !e.IsTimeout {
			t.Fatalf("got %v", err)
		}
		if n := len(f.log()); n != attempts {
			t.Fatalf("%d queries, want %d rounds of the first name only", n, attempts)
		}
	})
}

// Hosts answers first, ignoring case and a trailing dot, through the
// search domains, without a server; a name there has no other address.
func TestHosts(t *testing.T) {
	f := &fakeNet{servers: map[netip.AddrPort]handler{s1: webZone}}
	hosts := map[string][]netip.Addr{"Web.Internal.": {web6}, "db.lan": {web4, web6}}
	r := newResolver(f, Config{Servers: []netip.AddrPort{s1}, Search: []string{"lan"}, Hosts: hosts})
	for _, tc := range []struct {
		network, host string
		want          []netip.Addr
	}{
		{"ip", "web.internal", []netip.Addr{web6}},
		{"ip", "WEB.INTERNAL.", []netip.Addr{web6}},
		{"ip4", "db", []netip.Addr{web4}},
		{"ip6", "db.lan.", []netip.Addr{web6}},
	} {
		got, err := r.LookupNetIP(context.Background(), tc.network, tc.host)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: got %v, %v; want %v", tc.network, tc.host, got, err, tc.want)
		}
	}
	_, err := r.LookupNetIP(context.Background(), "ip4", "web.internal")
	wantNotFound(t, err, "")
	if log := f.log(); len(log) != 0 {
		t.Fatalf("a server was asked for a name in Hosts: %q", log)
	}

	noServers := New(Config{Hosts: hosts})
	if got, err := noServers.LookupNetIP(context.Background(), "ip", "db.lan"); err != nil || len(got) != 2 {
		t.Fatalf("Hosts without servers: %v, %v", got, err)
	}
	if _, err := noServers.LookupNetIP(context.Background(), "ip", "other.lan"); !errors.Is(err, ErrNoServers) {
		t.Fatalf("a name outside Hosts without servers: %v, want ErrNoServers", err)
	}
}

// IP literals come back as they are; bad names and networks are refused
// without a query.
func TestLiteralsAndBadNames(t *testing.T) {
	f := &fakeNet{servers: map[netip.AddrPort]handler{s1: webZone}}
	r := newResolver(f, Config{Servers: []netip.AddrPort{s1}})
	for _, lit := range []string{"192.0.2.1", "fd00::1", "::ffff:192.0.2.1"} {
		got, err := r.LookupNetIP(context.Background(), "ip", lit)
		if err != nil || len(got) != 1 || got[0] != netip.MustParseAddr(lit) {
			t.Errorf("%s: got %v, %v", lit, got, err)
		}
	}
	long := string(make([]byte, 64))
	for _, bad := range []string{"", ".", "a..b", "-web.internal", "web internal", "a." + long, "x\x00y"} {
		if _, err := r.LookupNetIP(context.Background(), "ip", bad); err == nil || !err.(*net.DNSError).IsNotFound {
			t.Errorf("%q: %v, want not found", bad, err)
		}
	}
	if _, err := r.LookupNetIP(context.Background(), "tcp", "web.internal"); err == nil {
		t.Error("network tcp was accepted")
	}
	if log := f.log(); len(log) != 0 {
		t.Fatalf("asked %q", log)
	}
}

// "ip" asks A and AAAA and lists IPv4 first; one family's records are
// enough.
func TestBothFamilies(t *testing.T) {
	f := &fakeNet{servers: map[netip.AddrPort]handler{s1: webZone}}
	r := newResolver(f, Config{Servers: []netip.AddrPort{s1}})
	if got, err := r.LookupNetIP(context.Background(), "ip", "web.internal"); err != nil || !slices.Equal(got, []netip.Addr{web4, web6}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := r.LookupNetIP(context.Background(), "ip", "v4only.internal"); err != nil || !slices.Equal(got, []netip.Addr{web4}) {
		t.Fatalf("v4 only: got %v, %v", got, err)
	}
	_, err := r.LookupNetIP(context.Background(), "ip6", "v4only.internal")
	wantNotFound(t, err, s1.String())
}

// The caller's context ends the lookup at once, with its error.
func TestContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNet{servers: map[netip.AddrPort]handler{s1: silent, s2: webZone}}
		r := newResolver(f, Config{Servers: []netip.AddrPort{s1, s2}})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := r.LookupNetIP(ctx, "ip", "web.internal")
		var e *net.DNSError
		if !errors.As(err, &e) || !e.IsTimeout || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %#v", err)
		}
		ctx, cancel = context.WithCancel(context.Background())
		cancel()
		if _, err := r.LookupNetIP(ctx, "ip", "web.internal"); !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled: got %v", err)
		}
	})
}

// One lost datagram does not fail a lookup: when every server timed out,
// each is asked once more, as resolv.conf's attempts:2 does.
func TestLostQueryAskedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := 0
		lossy := func(network string, query []byte) [][]byte {
			mu.Lock()
			seen++
			first := seen == 1
			mu.Unlock()
			if first {
				return nil
			}
			return webZone(network, query)
		}
		f := &fakeNet{servers: map[netip.AddrPort]handler{s1: lossy}}
		r := newResolver(f, Config{Servers: []netip.AddrPort{s1}})
		start := time.Now()
		got, err := r.LookupNetIP(context.Background(), "ip4", "web.internal")
		if err != nil || !slices.Equal(got, []netip.Addr{web4}) {
			t.Fatalf("got %v, %v", got, err)
		}
		if d := time.Since(start); d != DefaultTimeout {
			t.Fatalf("took %v, want one timeout (%v)", d, DefaultTimeout)
		}
	})
}
