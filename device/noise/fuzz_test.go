package noise

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// parseError reports whether err is one of the parse sentinels: parsers
// must fail with ErrMessageSize or ErrMessageType, and nothing else.
func parseError(err error) bool {
	return errors.Is(err, ErrMessageSize) || errors.Is(err, ErrMessageType)
}

func FuzzParseInitiation(f *testing.F) {
	m := sampleInitiation()
	f.Add(m.AppendTo(nil))
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseInitiation(b)
		if err != nil {
			if !parseError(err) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !bytes.Equal(m.AppendTo(nil), b) {
			t.Fatal("round trip changed the message")
		}
	})
}

func FuzzParseResponse(f *testing.F) {
	m := sampleResponse()
	f.Add(m.AppendTo(nil))
	f.Add([]byte{2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseResponse(b)
		if err != nil {
			if !parseError(err) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !bytes.Equal(m.AppendTo(nil), b) {
			t.Fatal("round trip changed the message")
		}
		if idx, ok := ReceiverIndex(b); !ok || idx != m.Receiver {
			t.Fatal("ReceiverIndex disagrees with ParseResponse")
		}
	})
}

func FuzzParseCookieReply(f *testing.F) {
	m := sampleCookieReply()
	f.Add(m.AppendTo(nil))
	f.Add([]byte{3, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseCookieReply(b)
		if err != nil {
			if !parseError(err) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !bytes.Equal(m.AppendTo(nil), b) {
			t.Fatal("round trip changed the message")
		}
		if idx, ok := ReceiverIndex(b); !ok || idx != m.Receiver {
			t.Fatal("ReceiverIndex disagrees with ParseCookieReply")
		}
	})
}

func FuzzParseTransportHeader(f *testing.F) {
	b := make([]byte, TransportOverhead+20)
	PutTransportHeader(b, 0x01020304, 99)
	f.Add(b)
	f.Add(b[:TransportOverhead])
	f.Add([]byte{4, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, c, err := ParseTransportHeader(b)
		if err != nil {
			if !parseError(err) {
				t.Fatalf("unexpected error %v", err)
			}
			if _, ok := ReceiverIndex(b); ok && PeekType(b) == TypeTransport {
				t.Fatal("ReceiverIndex accepts what ParseTransportHeader refuses")
			}
			return
		}
		out := bytes.Clone(b)
		PutTransportHeader(out, r, c)
		if !bytes.Equal(out, b) {
			t.Fatal("round trip changed the header")
		}
		if idx, ok := ReceiverIndex(b); !ok || idx != r {
			t.Fatal("ReceiverIndex disagrees with ParseTransportHeader")
		}
	})
}

// fuzzFixture is a deterministic mid-handshake state: a's initiation to b is
// in flight (index 77) and b answered it; valid holds the wire forms.
type fuzzFixture struct {
	p                *peers
	fresh            *Handshake // b's handshake with a before any message
	gen              *CookieGenerator
	init, resp, repl []byte
}

func newFuzzFixture(t testing.TB) *fuzzFixture {
	p := newPeers(t, PresharedKey(seq(32, 3)), PresharedKey(seq(32, 3)))
	fx := &fuzzFixture{p: p, fresh: NewHandshake(p.b, p.a.Public, PresharedKey(seq(32, 3)))}
	m, err := p.ha.CreateInitiation(t0, seeded(1), 77)
	if err != nil {
		t.Fatal(err)
	}
	fx.init = m.AppendTo(nil)
	fx.gen = NewCookieGenerator(p.b.Public)
	fx.gen.AddMACs(fx.init, t0)
	info, err := OpenInitiation(p.b, &m)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		t.Fatal(err)
	}
	r, err := p.hb.CreateResponse(seeded(2), 88)
	if err != nil {
		t.Fatal(err)
	}
	fx.resp = r.AppendTo(nil)
	checker := NewCookieChecker(p.b.Public, seeded(3))
	reply, err := checker.CreateReply(fx.init, 77, ourUDPAddr, t0)
	if err != nil {
		t.Fatal(err)
	}
	fx.repl = reply.AppendTo(nil)
	return fx
}

// asMessage turns arbitrary bytes into a well-formed message of the given
// type and size, so the fuzzer reaches the cryptography and not only the
// parser.
func asMessage(typ uint32, size int, body []byte) []byte {
	b := make([]byte, size)
	b[0] = byte(typ)
	copy(b[4:], body)
	return b
}

// FuzzConsume feeds fuzzed bytes to OpenInitiation+AcceptInitiation,
// ConsumeResponse and ConsumeReply. Nothing may panic; a failure must leave
// the state as it was; and success is only allowed for the authentic
// message (up to the fields the protocol leaves unauthenticated: sender
// indices and the MACs).
func FuzzConsume(f *testing.F) {
	fx := newFuzzFixture(f)
	for _, b := range [][]byte{fx.init, fx.resp, fx.repl} {
		f.Add(b)
		f.Add(b[4:])
	}
	f.Add([]byte{})
	// The fixture is shared: every check restores what a success changed,
	// and a failure must change nothing, which the checks assert.
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range [][]byte{b, asMessage(TypeInitiation, InitiationSize, b)} {
			fuzzInitiation(t, fx, m)
		}
		for _, m := range [][]byte{b, asMessage(TypeResponse, ResponseSize, b)} {
			fuzzResponse(t, fx, m)
		}
		for _, m := range [][]byte{b, asMessage(TypeCookieReply, CookieReplySize, b)} {
			fuzzCookieReply(t, fx, m)
		}
	})
}

func fuzzInitiation(t *testing.T, fx *fuzzFixture, b []byte) {
	m, err := ParseInitiation(b)
	if err != nil {
		return
	}
	info, err := OpenInitiation(fx.p.b, &m)
	if err != nil {
		return
	}
	before := snapshot(fx.fresh)
	if err := fx.fresh.AcceptInitiation(&info, t0); err != nil {
		unchanged(t, "refused initiation", fx.fresh, before)
		return
	}
	if !bytes.Equal(b[8:116], fx.init[8:116]) {
		t.Fatalf("forged initiation accepted: %x", b)
	}
	before.restore(fx.fresh) // the next candidate starts from scratch too
}

func fuzzResponse(t *testing.T, fx *fuzzFixture, b []byte) {
	m, err := ParseResponse(b)
	if err != nil {
		return
	}
	before := snapshot(fx.p.ha)
	if err := fx.p.ha.ConsumeResponse(&m, t0); err != nil {
		unchanged(t, "refused response", fx.p.ha, before)
		return
	}
	if !bytes.Equal(b[8:60], fx.resp[8:60]) {
		t.Fatalf("forged response accepted: %x", b)
	}
	before.restore(fx.p.ha)
}

func fuzzCookieReply(t *testing.T, fx *fuzzFixture, b []byte) {
	m, err := ParseCookieReply(b)
	if err != nil {
		return
	}
	g := fx.gen
	cookie, set := g.cookie, g.cookieSet
	if err := g.ConsumeReply(&m, t0.Add(time.Second)); err != nil {
		if g.cookie != cookie || g.cookieSet != set {
			t.Fatal("refused reply changed the cookie")
		}
		return
	}
	if !bytes.Equal(b[8:], fx.repl[8:]) {
		t.Fatalf("forged cookie reply accepted: %x", b)
	}
	g.cookie, g.cookieSet = cookie, set // the next candidate starts from scratch too
}
