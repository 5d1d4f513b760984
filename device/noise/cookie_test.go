package noise

import (
	"bytes"
	"crypto/rand"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"
)

type cookieSetup struct {
	checker *CookieChecker
	gen     *CookieGenerator
	msg     []byte // an initiation to the checker's key, MACs filled
	src     netip.AddrPort
}

func newCookieSetup(t testing.TB) *cookieSetup {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	s := &cookieSetup{
		checker: NewCookieChecker(p.b.Public, rand.Reader),
		gen:     NewCookieGenerator(p.b.Public),
		msg:     mustInitiateBytes(t, p.ha),
		src:     netip.MustParseAddrPort("192.0.2.7:4000"),
	}
	s.gen.AddMACs(s.msg, t0)
	return s
}

// handshake fetches a cookie: the checker answers msg, the generator
// consumes the reply.
func (s *cookieSetup) fetchCookie(t testing.TB, now time.Time) {
	t.Helper()
	reply, err := s.checker.CreateReply(s.msg, 1, s.src, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.gen.ConsumeReply(&reply, now); err != nil {
		t.Fatal(err)
	}
}

func TestMAC1(t *testing.T) {
	s := newCookieSetup(t)
	if !s.checker.CheckMAC1(s.msg) {
		t.Fatal("valid MAC1 rejected")
	}
	for _, i := range []int{0, 50, InitiationSize - 2*macSize - 1, InitiationSize - 2*macSize} {
		b := bytes.Clone(s.msg)
		b[i] ^= 1
		if s.checker.CheckMAC1(b) {
			t.Fatalf("MAC1 accepted with byte %d changed", i)
		}
	}
	other := NewCookieChecker(PublicKey(seq(32, 5)), rand.Reader)
	if other.CheckMAC1(s.msg) {
		t.Fatal("MAC1 for another key accepted")
	}
	if s.checker.CheckMAC1(s.msg[:31]) || s.checker.CheckMAC1(nil) {
		t.Fatal("short message accepted")
	}
	// MAC2 does not enter MAC1.
	b := bytes.Clone(s.msg)
	b[InitiationSize-1] ^= 1
	if !s.checker.CheckMAC1(b) {
		t.Fatal("MAC1 depends on MAC2")
	}
}

func TestMAC2(t *testing.T) {
	s := newCookieSetup(t)
	if !isZero(s.msg[InitiationSize-macSize:]) {
		t.Fatal("MAC2 set without a cookie")
	}
	if s.checker.CheckMAC2(s.msg, s.src, t0) {
		t.Fatal("MAC2 accepted before any cookie existed")
	}
	s.fetchCookie(t, t0)
	if s.checker.CheckMAC2(s.msg, s.src, t0) {
		t.Fatal("zero MAC2 accepted")
	}
	s.gen.AddMACs(s.msg, t0)
	if !s.checker.CheckMAC1(s.msg) || !s.checker.CheckMAC2(s.msg, s.src, t0) {
		t.Fatal("MACs with a cookie rejected")
	}
	otherPort := netip.AddrPortFrom(s.src.Addr(), s.src.Port()+1)
	otherAddr := netip.MustParseAddrPort("192.0.2.8:4000")
	mapped := netip.AddrPortFrom(netip.AddrFrom16(s.src.Addr().As16()), s.src.Port())
	for _, src := range []netip.AddrPort{otherPort, otherAddr, mapped, {}} {
		if s.checker.CheckMAC2(s.msg, src, t0) {
			t.Fatalf("cookie for %v accepted from %v", s.src, src)
		}
	}
	b := bytes.Clone(s.msg)
	b[10] ^= 1
	if s.checker.CheckMAC2(b, s.src, t0) {
		t.Fatal("MAC2 accepted over a changed message")
	}
	if s.checker.CheckMAC2(s.msg[:20], s.src, t0) {
		t.Fatal("short message accepted")
	}
}

// TestCookieExpiry: a held cookie is used for less than CookieRefreshTime;
// the checker's secret is good for CookieRefreshTime and then replaced by
// the next reply, which invalidates every cookie given out before.
func TestCookieExpiry(t *testing.T) {
	s := newCookieSetup(t)
	s.fetchCookie(t, t0)
	oldCookie := s.gen.cookie

	s.gen.AddMACs(s.msg, t0.Add(CookieRefreshTime-time.Nanosecond))
	if isZero(s.msg[InitiationSize-macSize:]) {
		t.Fatal("cookie dropped before CookieRefreshTime")
	}
	if !s.checker.CheckMAC2(s.msg, s.src, t0.Add(CookieRefreshTime)) {
		t.Fatal("secret expired before CookieRefreshTime")
	}
	if s.checker.CheckMAC2(s.msg, s.src, t0.Add(CookieRefreshTime+time.Nanosecond)) {
		t.Fatal("MAC2 accepted after the secret expired")
	}
	s.gen.AddMACs(s.msg, t0.Add(CookieRefreshTime))
	if !isZero(s.msg[InitiationSize-macSize:]) {
		t.Fatal("cookie used at CookieRefreshTime")
	}

	// Two minutes on, the next reply carries a cookie from a new secret.
	later := t0.Add(2*time.Minute + time.Second)
	s.fetchCookie(t, later)
	if s.gen.cookie == oldCookie {
		t.Fatal("secret not rotated after 2 minutes")
	}
	s.gen.AddMACs(s.msg, later)
	if !s.checker.CheckMAC2(s.msg, s.src, later) {
		t.Fatal("new cookie rejected")
	}
	// A MAC2 made with the old cookie fails under the new secret.
	stale := bytes.Clone(s.msg)
	m := mac(oldCookie[:], stale[:InitiationSize-macSize])
	copy(stale[InitiationSize-macSize:], m[:])
	if s.checker.CheckMAC2(stale, s.src, later) {
		t.Fatal("old cookie accepted after rotation")
	}

	// Within the refresh time the secret is kept: same source, same cookie.
	s.fetchCookie(t, later.Add(time.Minute))
	s.gen.AddMACs(s.msg, later.Add(time.Minute))
	if !s.checker.CheckMAC2(s.msg, s.src, later) {
		t.Fatal("secret rotated too early")
	}
}

// TestCookieReplyOnlyForLastMAC1: a reply is bound to the MAC1 it answers;
// once we sent another message, replies to the earlier one are refused.
func TestCookieReplyOnlyForLastMAC1(t *testing.T) {
	s := newCookieSetup(t)
	fresh := NewCookieGenerator(PublicKey{})
	reply, err := s.checker.CreateReply(s.msg, 1, s.src, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.ConsumeReply(&reply, t0); !errors.Is(err, ErrNoCookieRequest) {
		t.Fatalf("reply before any message sent: %v", err)
	}

	p := newPeers(t, PresharedKey{}, PresharedKey{})
	second := mustInitiateBytes(t, p.ha)
	s.gen.AddMACs(second, t0) // a newer message with a different MAC1
	if err := s.gen.ConsumeReply(&reply, t0); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("reply to an older MAC1: %v", err)
	}
	if !s.gen.cookieSet.IsZero() {
		t.Fatal("refused reply set a cookie")
	}
	reply2, _ := s.checker.CreateReply(second, 1, s.src, t0)
	tampered := reply2
	tampered.Cookie[0] ^= 1
	if err := s.gen.ConsumeReply(&tampered, t0); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("tampered reply: %v", err)
	}
	if err := s.gen.ConsumeReply(&reply2, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.checker.CreateReply(nil, 1, s.src, t0); !errors.Is(err, ErrMessageSize) {
		t.Fatalf("reply to a short message: %v", err)
	}
	s.gen.AddMACs(make([]byte, 5), t0) // too short: left alone, no panic
}

func TestCookieRandomFailure(t *testing.T) {
	s := newCookieSetup(t)
	c := NewCookieChecker(PublicKey{}, failingReader{})
	if _, err := c.CreateReply(s.msg, 1, s.src, t0); !errors.Is(err, ErrRandom) {
		t.Fatalf("got %v", err)
	}
}

// TestCookieConcurrent exercises both sides from several goroutines (run
// with -race).
func TestCookieConcurrent(t *testing.T) {
	s := newCookieSetup(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			msg := bytes.Clone(s.msg)
			for i := range 50 {
				now := t0.Add(time.Duration(g*50+i) * 10 * time.Second)
				s.gen.AddMACs(msg, now)
				s.checker.CheckMAC1(msg)
				s.checker.CheckMAC2(msg, s.src, now)
				if r, err := s.checker.CreateReply(msg, 1, s.src, now); err == nil {
					s.gen.ConsumeReply(&r, now)
				}
			}
		})
	}
	wg.Wait()
}
