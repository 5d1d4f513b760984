package socks5

import (
	"errors"
	"maps"
	"net/netip"
	"testing"

	"github.com/fips-go/fips-go/internal/app/sockowner"
)

// fakeOwners answers owner lookups from a table of UDP source ports.
type fakeOwners map[uint16]uint32

func (f fakeOwners) owner(p sockowner.Proto, self, peer netip.AddrPort) (uint32, error) {
	if p == sockowner.TCP {
		return 1000, nil
	}
	if uid, ok := f[self.Port()]; ok {
		return uid, nil
	}
	return 0, sockowner.ErrNotFound
}

// TestUDPOwnerDecision: which datagrams an association takes, for a
// client of uid 1000 on 127.0.0.1, whose user holds port 4000; uid 2000
// holds port 5000 and nobody port 6000.
func TestUDPOwnerDecision(t *testing.T) {
	ap := netip.MustParseAddrPort
	owners := fakeOwners{4000: 1000, 4001: 1000, 5000: 2000}
	newAssoc := func(wantPort uint16, known bool) *association {
		s := &Server{owner: owners.owner}
		a := &association{s: s, relay: ap("127.0.0.1:1080"), want: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), wantPort)}
		a.owner, a.ownerKnown = 1000, known
		return a
	}
	type step struct {
		from string
		want verdict
	}
	for _, tc := range []struct {
		name     string
		wantPort uint16
		known    bool
		steps    []step
	}{
		{"any port: another user's socket cannot go first", 0, true, []step{
			{"127.0.0.1:5000", wrongOwner},
			{"127.0.0.1:6000", wrongOwner}, // owner unknown: refused too
			{"127.0.0.2:4000", foreign},
			{"127.0.0.1:4000", accept},
			{"127.0.0.1:4000", accept},
			{"127.0.0.1:4001", foreign}, // the client is learned; its user's other socket is not it
			{"127.0.0.1:5000", foreign},
		}},
		{"named port: only that exact address, and only its owner", 4000, true, []step{
			{"127.0.0.1:4001", foreign},
			{"127.0.0.1:4000", accept},
		}},
		{"named port held by another user", 5000, true, []step{
			{"127.0.0.1:5000", wrongOwner},
		}},
		{"owner unknown (not Linux, or a remote client): the address decides", 0, false, []step{
			{"127.0.0.2:5000", foreign},
			{"127.0.0.1:5000", accept},
			{"127.0.0.1:4000", foreign},
		}},
		{"owner unknown, named port: exact address", 4000, false, []step{
			{"127.0.0.1:5000", foreign},
			{"127.0.0.1:4000", accept},
		}},
	} {
		a := newAssoc(tc.wantPort, tc.known)
		for i, st := range tc.steps {
			if got := a.fromClient(ap(st.from)); got != st.want {
				t.Errorf("%s: step %d from %s: verdict %d, want %d", tc.name, i, st.from, got, st.want)
			}
		}
	}
}

func TestControlOwner(t *testing.T) {
	lap, rap := netip.MustParseAddrPort("127.0.0.1:1080"), netip.MustParseAddrPort("127.0.0.1:40000")
	s := &Server{opts: Options{Logf: t.Logf}, owner: func(p sockowner.Proto, self, peer netip.AddrPort) (uint32, error) {
		if p != sockowner.TCP || self != rap || peer != lap {
			return 0, errors.New("asked for the wrong socket")
		}
		return 1000, nil
	}}
	if uid, ok := s.controlOwner(lap, rap); uid != 1000 || !ok {
		t.Errorf("controlOwner: %d, %v; want the client's end's owner", uid, ok)
	}
	s.owner = func(sockowner.Proto, netip.AddrPort, netip.AddrPort) (uint32, error) {
		return 0, sockowner.ErrUnsupported
	}
	if _, ok := s.controlOwner(lap, rap); ok {
		t.Error("an unsupported lookup gave an owner")
	}
}

// TestUDPOwnerLookupOncePerPort: a sender the owner check refused costs
// one lookup, however many datagrams it sends; the client's own socket
// is still looked up, and after it is learned nothing is.
func TestUDPOwnerLookupOncePerPort(t *testing.T) {
	owners := fakeOwners{4000: 1000, 5000: 2000}
	lookups := map[uint16]int{}
	s := &Server{owner: func(p sockowner.Proto, self, peer netip.AddrPort) (uint32, error) {
		lookups[self.Port()]++
		return owners.owner(p, self, peer)
	}}
	a := &association{s: s, relay: netip.MustParseAddrPort("127.0.0.1:1080"), want: netip.MustParseAddrPort("127.0.0.1:0")}
	a.owner, a.ownerKnown = 1000, true
	for range 100 {
		for _, from := range []string{"127.0.0.1:5000", "127.0.0.1:6000"} {
			if v := a.fromClient(netip.MustParseAddrPort(from)); v != wrongOwner {
				t.Fatalf("from %s: verdict %d, want wrongOwner", from, v)
			}
		}
	}
	for range 100 {
		if v := a.fromClient(netip.MustParseAddrPort("127.0.0.1:4000")); v != accept {
			t.Fatalf("the client's socket: verdict %d, want accept", v)
		}
	}
	if want := (map[uint16]int{4000: 1, 5000: 1, 6000: 1}); !maps.Equal(lookups, want) {
		t.Errorf("lookups per source port %v, want %v", lookups, want)
	}
}
