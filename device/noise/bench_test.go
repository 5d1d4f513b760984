package noise

import (
	"crypto/rand"
	"testing"
)

// Handshake benchmarks measure one side's message processing, including
// its Diffie-Hellman operations; the state is rebuilt outside the timer
// where a step consumes it.

func BenchmarkCreateInitiation(b *testing.B) {
	p := newPeers(b, PresharedKey{}, PresharedKey{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.ha.CreateInitiation(t0, rand.Reader, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConsumeInitiation(b *testing.B) {
	p := newPeers(b, PresharedKey{}, PresharedKey{})
	m := mustInitiate(b, p.ha, t0, 1)
	b.ReportAllocs()
	for b.Loop() {
		info, err := OpenInitiation(p.b, &m)
		if err != nil {
			b.Fatal(err)
		}
		p.hb.lastTimestamp = [TimestampSize]byte{} // accept the same message again
		p.hb.lastInitiation = t0.Add(-HandshakeInitiationRate)
		if err := p.hb.AcceptInitiation(&info, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCreateResponse(b *testing.B) {
	p := newPeers(b, PresharedKey{}, PresharedKey{})
	m := mustInitiate(b, p.ha, t0, 1)
	info := mustOpen(b, p.b, &m)
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		b.Fatal(err)
	}
	accepted := *p.hb
	b.ReportAllocs()
	for b.Loop() {
		*p.hb = accepted
		if _, err := p.hb.CreateResponse(rand.Reader, 2); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConsumeResponse(b *testing.B) {
	p := newPeers(b, PresharedKey{}, PresharedKey{})
	m := mustInitiate(b, p.ha, t0, 1)
	info := mustOpen(b, p.b, &m)
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		b.Fatal(err)
	}
	resp, err := p.hb.CreateResponse(rand.Reader, 2)
	if err != nil {
		b.Fatal(err)
	}
	initiated := *p.ha
	b.ReportAllocs()
	for b.Loop() {
		*p.ha = initiated
		if err := p.ha.ConsumeResponse(&resp, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	a, _ := testKeypairs(b)
	pt := seq(1420, 0)
	dst := make([]byte, 0, TransportHeaderSize+len(pt)+TagSize)
	b.SetBytes(int64(len(pt)))
	b.ReportAllocs()
	nonce := new(Nonce)
	for b.Loop() {
		c, _ := a.NextCounter()
		a.Seal(nonce, dst[:TransportHeaderSize], c, pt)
	}
}

func BenchmarkOpen(b *testing.B) {
	a, r := testKeypairs(b)
	ct := a.Seal(new(Nonce), nil, 5, seq(1420, 0))
	dst := make([]byte, 0, len(ct))
	b.SetBytes(1420)
	b.ReportAllocs()
	nonce := new(Nonce)
	for b.Loop() {
		if _, err := r.Open(nonce, dst[:0], 5, ct); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIndexTableLookup(b *testing.B) {
	tab := NewIndexTable[*Keypair](rand.Reader)
	for range 1000 {
		tab.Insert(&Keypair{})
	}
	idx, _ := tab.Insert(&Keypair{})
	b.ReportAllocs()
	for b.Loop() {
		tab.Lookup(idx)
	}
}

func BenchmarkCookieCheckMAC1(b *testing.B) {
	p := newPeers(b, PresharedKey{}, PresharedKey{})
	m := mustInitiate(b, p.ha, t0, 1)
	msg := m.AppendTo(nil)
	NewCookieGenerator(p.b.Public).AddMACs(msg, t0)
	c := NewCookieChecker(p.b.Public, rand.Reader)
	b.ReportAllocs()
	for b.Loop() {
		if !c.CheckMAC1(msg) {
			b.Fatal("MAC1")
		}
	}
}
