package noise

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"testing"
	"time"
)

// t0 is an arbitrary test clock start; handshake code never reads a clock.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type peers struct {
	a, b   *Static    // a initiates, b responds
	ha, hb *Handshake // a's handshake with b, b's with a
}

func newPeers(t testing.TB, pskA, pskB PresharedKey) *peers {
	a, b := NewStatic(testKey(t, 11)), NewStatic(testKey(t, 12))
	return &peers{a: a, b: b, ha: NewHandshake(a, b.Public, pskA), hb: NewHandshake(b, a.Public, pskB)}
}

func mustInitiate(t testing.TB, h *Handshake, now time.Time, idx uint32) Initiation {
	t.Helper()
	m, err := h.CreateInitiation(now, rand.Reader, idx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustOpen(t testing.TB, local *Static, m *Initiation) InitiationInfo {
	t.Helper()
	info, err := OpenInitiation(local, m)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// handshakeCopy is a deep copy of a Handshake, for unchanged.
type handshakeCopy struct {
	h    Handshake // its handshakeWork nil
	w    handshakeWork
	hasW bool
}

func snapshot(h *Handshake) handshakeCopy {
	c := handshakeCopy{h: *h}
	c.h.handshakeWork = nil
	if h.handshakeWork != nil {
		c.w, c.hasW = *h.handshakeWork, true
	}
	return c
}

// restore puts the copy back into h.
func (c handshakeCopy) restore(h *Handshake) {
	*h = c.h
	if c.hasW {
		w := c.w
		h.handshakeWork = &w
	}
}

// unchanged fails unless h equals the copy taken before a failed call:
// failed messages must leave the handshake exactly as it was.
func unchanged(t *testing.T, what string, h *Handshake, before handshakeCopy) {
	t.Helper()
	// The static-static DH is a cache a failed call may fill (it depends
	// only on the two static keys), and the working state it lives in may
	// have been allocated for it; everything else must be as it was.
	after := snapshot(h)
	if !before.hasW && after.hasW {
		before.w, before.hasW = handshakeWork{hash0: after.w.hash0}, true
		if after.w.hash0 != initialHash(&h.remote) {
			t.Fatalf("%s: wrong initial hash", what)
		}
	}
	after.w.staticStatic, after.w.ssDone, after.w.ssErr = before.w.staticStatic, before.w.ssDone, before.w.ssErr
	if after != before {
		t.Fatalf("%s changed the handshake", what)
	}
}

// The static-static DH is computed by the first handshake that needs it,
// not when a peer is added (a gateway adds 100,000 at once), and anew after
// the local key changes; a low-order peer key still fails every handshake.
func TestStaticStaticIsLazy(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	fresh := NewHandshake(p.ha.local, p.ha.remote, PresharedKey{})
	if fresh.handshakeWork != nil {
		t.Fatal("NewHandshake computed the static-static DH (or allocated handshake state)")
	}
	mustInitiate(t, fresh, t0, 7)
	if !fresh.ssDone || fresh.staticStatic == ([hashSize]byte{}) {
		t.Fatal("CreateInitiation left the static-static DH uncomputed")
	}
	want := fresh.staticStatic
	fresh.SetLocal(p.ha.local)
	if fresh.ssDone || fresh.staticStatic != ([hashSize]byte{}) {
		t.Fatal("SetLocal kept the old static-static DH")
	}
	mustInitiate(t, fresh, t0.Add(time.Second), 8)
	if fresh.staticStatic != want {
		t.Fatal("the recomputed static-static DH differs for the same keys")
	}
	low := NewHandshake(p.ha.local, PublicKey{}, PresharedKey{}) // the all-zero point
	for range 2 {
		if _, err := low.CreateInitiation(t0, rand.Reader, 9); err == nil {
			t.Fatal("an initiation to a low-order peer key was created")
		}
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

func TestHandshakeRoundTrip(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	init := mustInitiate(t, p.ha, t0, 1001)
	if p.ha.State() != HandshakeInitiationCreated || p.ha.LocalIndex() != 1001 {
		t.Fatalf("initiator: %v index %d", p.ha.State(), p.ha.LocalIndex())
	}
	info := mustOpen(t, p.b, &init)
	if info.Remote != p.a.Public {
		t.Fatal("opened the wrong static key")
	}
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		t.Fatal(err)
	}
	if p.hb.State() != HandshakeInitiationConsumed {
		t.Fatal(p.hb.State())
	}
	resp, err := p.hb.CreateResponse(rand.Reader, 2002)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Receiver != 1001 || resp.Sender != 2002 || p.hb.LocalIndex() != 2002 {
		t.Fatalf("response indices %d -> %d", resp.Sender, resp.Receiver)
	}
	if err := p.ha.ConsumeResponse(&resp, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if p.ha.State() != HandshakeResponseConsumed || p.hb.State() != HandshakeResponseCreated {
		t.Fatal(p.ha.State(), p.hb.State())
	}
	ka, err := p.ha.DeriveKeypair(t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	kb, err := p.hb.DeriveKeypair(t0)
	if err != nil {
		t.Fatal(err)
	}
	if !ka.Initiator || kb.Initiator || ka.LocalIndex != 1001 || ka.RemoteIndex != 2002 ||
		kb.LocalIndex != 2002 || kb.RemoteIndex != 1001 || !ka.Created.Equal(t0.Add(time.Second)) {
		t.Fatalf("keypairs %+v %+v", ka, kb)
	}
	for _, h := range []*Handshake{p.ha, p.hb} {
		if h.State() != HandshakeNone || h.LocalIndex() != 0 || h.ephemeral != nil ||
			!isZero(h.chainKey[:]) || !isZero(h.hash[:]) || !isZero(h.remoteEphemeral[:]) {
			t.Fatal("DeriveKeypair left handshake secrets behind")
		}
	}
	checkKeypairsMatch(t, ka, kb)
	checkKeypairsMatch(t, kb, ka)
}

// checkKeypairsMatch proves from's send key is to's receive key.
func checkKeypairsMatch(t *testing.T, from, to *Keypair) {
	t.Helper()
	msg := []byte("transport data")
	c, _ := from.NextCounter()
	ct := from.Seal(new(Nonce), nil, c, msg)
	pt, err := to.Open(new(Nonce), nil, c, ct)
	if err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("keypairs do not match: %v", err)
	}
}

func TestReplayedTimestamp(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	older := mustInitiate(t, p.ha, t0.Add(-time.Second), 1)
	sameStep := mustInitiate(t, p.ha, t0.Add(5*time.Millisecond), 2) // rounds to t0's timestamp
	first := mustInitiate(t, p.ha, t0, 3)
	info := mustOpen(t, p.b, &first)
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour) // well past the flood limit
	for name, m := range map[string]Initiation{"same": first, "older": older, "same TAI64N step": sameStep} {
		before := snapshot(p.hb)
		info := mustOpen(t, p.b, &m)
		wantErr(t, name, p.hb.AcceptInitiation(&info, later), ErrReplayedTimestamp)
		unchanged(t, name, p.hb, before)
	}
	newer := mustInitiate(t, p.ha, t0.Add(time.Second), 4)
	info = mustOpen(t, p.b, &newer)
	if err := p.hb.AcceptInitiation(&info, later); err != nil {
		t.Fatalf("newer timestamp: %v", err)
	}
}

func TestInitiationFlood(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	m1 := mustInitiate(t, p.ha, t0, 1)
	// The initiator's clock runs ahead so timestamps are fresh; the
	// responder's now is what the flood rule measures.
	m2 := mustInitiate(t, p.ha, t0.Add(time.Second), 2)
	i1, i2 := mustOpen(t, p.b, &m1), mustOpen(t, p.b, &m2)
	r0 := t0.Add(time.Minute)
	if err := p.hb.AcceptInitiation(&i1, r0); err != nil {
		t.Fatal(err)
	}
	before := snapshot(p.hb)
	wantErr(t, "flood", p.hb.AcceptInitiation(&i2, r0.Add(HandshakeInitiationRate-time.Nanosecond)), ErrFlood)
	unchanged(t, "flood", p.hb, before)
	wantErr(t, "clock went back", p.hb.AcceptInitiation(&i2, r0.Add(-time.Second)), ErrFlood)
	unchanged(t, "clock went back", p.hb, before)
	if err := p.hb.AcceptInitiation(&i2, r0.Add(HandshakeInitiationRate)); err != nil {
		t.Fatalf("after HandshakeInitiationRate: %v", err)
	}
}

func TestUnknownStaticKey(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	stranger := NewStatic(testKey(t, 13))
	hs := NewHandshake(stranger, p.b.Public, PresharedKey{})
	m := mustInitiate(t, hs, t0, 1)

	// b decrypts the stranger's static key: the device finds no peer for
	// it and stops. Handing it to another peer's handshake is refused.
	info := mustOpen(t, p.b, &m)
	if info.Remote != stranger.Public {
		t.Fatal("wrong static key")
	}
	before := snapshot(p.hb)
	wantErr(t, "other peer", p.hb.AcceptInitiation(&info, t0), ErrUnknownPeer)
	unchanged(t, "other peer", p.hb, before)

	// An initiation for someone else does not open at all.
	_, err := OpenInitiation(p.a, &m)
	wantErr(t, "wrong responder", err, ErrDecrypt)

	// Neither does garbage.
	var garbage Initiation
	io.ReadFull(seeded(99), garbage.Ephemeral[:])
	io.ReadFull(seeded(98), garbage.Static[:])
	_, err = OpenInitiation(p.b, &garbage)
	wantErr(t, "garbage", err, ErrDecrypt)
}

func TestPresharedKeyMismatch(t *testing.T) {
	psk1, psk2 := PresharedKey(testKey(t, 21)), PresharedKey(testKey(t, 22))
	p := newPeers(t, psk1, psk2)
	m := mustInitiate(t, p.ha, t0, 1)
	info := mustOpen(t, p.b, &m)
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		t.Fatal(err) // the psk only enters with the response
	}
	resp, err := p.hb.CreateResponse(rand.Reader, 2)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(p.ha)
	wantErr(t, "psk mismatch", p.ha.ConsumeResponse(&resp, t0), ErrDecrypt)
	unchanged(t, "psk mismatch", p.ha, before)
	// Because nothing changed, the right key still completes it.
	p.ha.SetPresharedKey(psk2)
	if p.ha.PresharedKey() != psk2 {
		t.Fatal("PresharedKey")
	}
	if err := p.ha.ConsumeResponse(&resp, t0); err != nil {
		t.Fatal(err)
	}
}

// TestTamperedInitiation flips every authenticated byte of an initiation:
// each must be refused without touching the responder's state. The sender
// index (bytes 4-8) is not authenticated by the protocol and the MACs are
// the CookieChecker's business.
func TestTamperedInitiation(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	wire := mustInitiateBytes(t, p.ha)
	before := snapshot(p.hb)
	for i := 8; i < InitiationSize-2*macSize; i++ {
		b := bytes.Clone(wire)
		b[i] ^= 1
		m, err := ParseInitiation(b)
		if err != nil {
			t.Fatal(err)
		}
		info, err := OpenInitiation(p.b, &m)
		if err == nil {
			err = p.hb.AcceptInitiation(&info, t0)
		}
		if err == nil {
			t.Fatalf("initiation with byte %d flipped accepted", i)
		}
		unchanged(t, "tampered initiation", p.hb, before)
	}
}

func mustInitiateBytes(t testing.TB, h *Handshake) []byte {
	m := mustInitiate(t, h, t0, 1)
	return m.AppendTo(nil)
}

func TestTamperedResponse(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	m := mustInitiate(t, p.ha, t0, 1)
	info := mustOpen(t, p.b, &m)
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		t.Fatal(err)
	}
	resp, err := p.hb.CreateResponse(rand.Reader, 2)
	if err != nil {
		t.Fatal(err)
	}
	wire := resp.AppendTo(nil)
	before := snapshot(p.ha)
	for i := 8; i < ResponseSize-2*macSize; i++ {
		b := bytes.Clone(wire)
		b[i] ^= 1
		r, _ := ParseResponse(b)
		if err := p.ha.ConsumeResponse(&r, t0); err == nil {
			t.Fatalf("response with byte %d flipped accepted", i)
		}
		unchanged(t, "tampered response", p.ha, before)
	}
	if err := p.ha.ConsumeResponse(&resp, t0); err != nil {
		t.Fatal(err)
	}
}

func TestStateErrors(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	var resp Response
	before := snapshot(p.ha)
	_, err := p.ha.CreateResponse(rand.Reader, 1)
	wantErr(t, "CreateResponse without initiation", err, ErrState)
	wantErr(t, "ConsumeResponse without initiation", p.ha.ConsumeResponse(&resp, t0), ErrState)
	_, err = p.ha.DeriveKeypair(t0)
	wantErr(t, "DeriveKeypair in state none", err, ErrState)
	wantErr(t, "AcceptInitiation(nil)", p.ha.AcceptInitiation(nil, t0), ErrState)
	wantErr(t, "AcceptInitiation(zero info)", p.ha.AcceptInitiation(&InitiationInfo{}, t0), ErrState)
	unchanged(t, "state errors", p.ha, before)

	m := mustInitiate(t, p.ha, t0, 7)
	_, err = p.ha.DeriveKeypair(t0)
	wantErr(t, "DeriveKeypair before the response", err, ErrState)
	info := mustOpen(t, p.b, &m)
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		t.Fatal(err)
	}
	resp, err = p.hb.CreateResponse(rand.Reader, 8)
	if err != nil {
		t.Fatal(err)
	}
	before = snapshot(p.ha)
	wrong := resp
	wrong.Receiver = 6
	wantErr(t, "wrong receiver", p.ha.ConsumeResponse(&wrong, t0), ErrState)
	wantErr(t, "late response", p.ha.ConsumeResponse(&resp, t0.Add(RejectAfterTime+time.Second)), ErrExpired)
	unchanged(t, "refused responses", p.ha, before)
	if err := p.ha.ConsumeResponse(&resp, t0.Add(RejectAfterTime)); err != nil {
		t.Fatal(err)
	}
	before = snapshot(p.ha)
	wantErr(t, "second response", p.ha.ConsumeResponse(&resp, t0), ErrState)
	unchanged(t, "second response", p.ha, before)
}

func TestNoPrivateKey(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	h := NewHandshake(nil, p.b.Public, PresharedKey{})
	before := snapshot(h)
	_, err := h.CreateInitiation(t0, rand.Reader, 1)
	wantErr(t, "CreateInitiation", err, ErrNoPrivateKey)
	m := mustInitiate(t, p.ha, t0, 1)
	_, err = OpenInitiation(nil, &m)
	wantErr(t, "OpenInitiation", err, ErrNoPrivateKey)
	// An initiation to b, handed to a keyless handshake for a.
	info := mustOpen(t, p.b, &m)
	hb := NewHandshake(nil, p.a.Public, PresharedKey{})
	wantErr(t, "AcceptInitiation", hb.AcceptInitiation(&info, t0), ErrNoPrivateKey)
	unchanged(t, "keyless", h, before)

	h.SetLocal(p.a)
	m = mustInitiate(t, h, t0.Add(time.Second), 2)
	info = mustOpen(t, p.b, &m)
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		t.Fatalf("after SetLocal: %v", err)
	}
}

func TestLowOrderPoints(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	for _, bad := range []PublicKey{{}, {1}} {
		h := NewHandshake(p.a, bad, PresharedKey{})
		_, err := h.CreateInitiation(t0, rand.Reader, 1)
		wantErr(t, "low-order peer key", err, ErrInvalidPublicKey)

		m := mustInitiate(t, p.ha, t0, 1)
		m.Ephemeral = bad
		_, err = OpenInitiation(p.b, &m)
		wantErr(t, "low-order initiation ephemeral", err, ErrInvalidPublicKey)

		before := snapshot(p.ha)
		resp := Response{Receiver: 1, Ephemeral: bad}
		wantErr(t, "low-order response ephemeral", p.ha.ConsumeResponse(&resp, t0), ErrInvalidPublicKey)
		unchanged(t, "low-order response", p.ha, before)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("entropy exhausted") }

func TestRandomFailure(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	before := snapshot(p.ha)
	_, err := p.ha.CreateInitiation(t0, failingReader{}, 1)
	wantErr(t, "CreateInitiation", err, ErrRandom)
	unchanged(t, "CreateInitiation", p.ha, before)

	m := mustInitiate(t, p.ha, t0, 1)
	info := mustOpen(t, p.b, &m)
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		t.Fatal(err)
	}
	before = snapshot(p.hb)
	_, err = p.hb.CreateResponse(failingReader{}, 2)
	wantErr(t, "CreateResponse", err, ErrRandom)
	unchanged(t, "CreateResponse", p.hb, before)
}

func TestSetLocalResets(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	m := mustInitiate(t, p.hb, t0, 5) // b's own initiation in flight
	info := mustOpen(t, p.b, ptr(mustInitiate(t, p.ha, t0, 1)))
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		t.Fatal(err)
	}
	lastTimestamp := p.hb.lastTimestamp
	p.hb.SetLocal(NewStatic(testKey(t, 14)))
	if p.hb.State() != HandshakeNone || p.hb.LocalIndex() != 0 || p.hb.ephemeral != nil {
		t.Fatal("SetLocal kept the in-flight handshake")
	}
	if p.hb.lastTimestamp != lastTimestamp {
		t.Fatal("SetLocal forgot the replay state")
	}
	// b's initiations now carry its new static key, which a does not
	// know as a peer.
	m2 := mustInitiate(t, p.hb, t0, 6)
	info2 := mustOpen(t, p.a, &m2)
	if info2.Remote == p.b.Public {
		t.Fatal("initiation still carries the old static key")
	}
	wantErr(t, "new key at a", p.ha.AcceptInitiation(&info2, t0), ErrUnknownPeer)
	// Before SetLocal, b's initiation carried the old key and was a's peer.
	if info := mustOpen(t, p.a, &m); info.Remote != p.b.Public {
		t.Fatal("old initiation")
	}
}

func ptr[T any](v T) *T { return &v }

// TestSimultaneousInitiation: both sides initiate; the responder role wins
// on the side that accepts the other's initiation, and its old index stays
// visible until CreateResponse replaces it.
func TestSimultaneousInitiation(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	ma := mustInitiate(t, p.ha, t0, 1)
	mustInitiate(t, p.hb, t0, 2)
	info := mustOpen(t, p.b, &ma)
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		t.Fatal(err)
	}
	if p.hb.State() != HandshakeInitiationConsumed || p.hb.LocalIndex() != 2 {
		t.Fatalf("after accept: %v index %d", p.hb.State(), p.hb.LocalIndex())
	}
	resp, err := p.hb.CreateResponse(rand.Reader, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.hb.LocalIndex() != 3 {
		t.Fatal("CreateResponse did not take the new index")
	}
	if err := p.ha.ConsumeResponse(&resp, t0); err != nil {
		t.Fatal(err)
	}
	ka, _ := p.ha.DeriveKeypair(t0)
	kb, _ := p.hb.DeriveKeypair(t0)
	checkKeypairsMatch(t, ka, kb)
}

func TestClear(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	m := mustInitiate(t, p.ha, t0, 1)
	info := mustOpen(t, p.b, &m)
	if err := p.hb.AcceptInitiation(&info, t0); err != nil {
		t.Fatal(err)
	}
	resp, _ := p.hb.CreateResponse(rand.Reader, 2)
	p.ha.Clear()
	if p.ha.State() != HandshakeNone || p.ha.ephemeral != nil || !isZero(p.ha.chainKey[:]) || !isZero(p.ha.hash[:]) {
		t.Fatal("Clear left material")
	}
	wantErr(t, "response after Clear", p.ha.ConsumeResponse(&resp, t0), ErrState)
	if p.ha.Remote() != p.b.Public {
		t.Fatal("Remote")
	}
	if HandshakeResponseConsumed.String() != "response consumed" || HandshakeState(42).String() != "HandshakeState(42)" {
		t.Fatal("String")
	}
}

func TestNilMessages(t *testing.T) {
	p := newPeers(t, PresharedKey{}, PresharedKey{})
	_, err := OpenInitiation(p.b, nil)
	wantErr(t, "OpenInitiation(nil)", err, ErrMessageSize)
	wantErr(t, "ConsumeResponse(nil)", p.ha.ConsumeResponse(nil, t0), ErrMessageSize)
	wantErr(t, "ConsumeReply(nil)", NewCookieGenerator(p.b.Public).ConsumeReply(nil, t0), ErrMessageSize)
}
