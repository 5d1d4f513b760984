package noise

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

// testKeypairs returns two keypairs whose keys mirror each other.
func testKeypairs(t testing.TB) (initiator, responder *Keypair) {
	t.Helper()
	k1, k2 := [32]byte(seq(32, 1)), [32]byte(seq(32, 100))
	a, err := newKeypair(&k1, &k2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newKeypair(&k2, &k1)
	if err != nil {
		t.Fatal(err)
	}
	a.Initiator = true
	a.LocalIndex, a.RemoteIndex = 1, 2
	b.LocalIndex, b.RemoteIndex = 2, 1
	return a, b
}

func TestKeypairSealOpen(t *testing.T) {
	a, b := testKeypairs(t)
	msg := seq(100, 0)
	ct := a.Seal(new(Nonce), []byte("hdr"), 7, msg)
	if len(ct) != 3+len(msg)+TagSize || string(ct[:3]) != "hdr" {
		t.Fatalf("Seal appended %d bytes", len(ct)-3)
	}
	pt, err := b.Open(new(Nonce), nil, 7, ct[3:])
	if err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("Open: %v", err)
	}
	if _, err := b.Open(new(Nonce), nil, 8, ct[3:]); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("wrong counter: %v", err)
	}
	if _, err := a.Open(new(Nonce), nil, 7, ct[3:]); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("own send key opened: %v", err)
	}
	bad := bytes.Clone(ct[3:])
	bad[len(bad)-1] ^= 1
	if _, err := b.Open(new(Nonce), nil, 7, bad); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("tampered: %v", err)
	}
	if _, err := b.Open(new(Nonce), nil, 7, ct[3:10]); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("shorter than a tag: %v", err)
	}
	// The nonce is 4 zero bytes then the counter, little-endian: check
	// against an AEAD built directly.
	keys := a.keys.Load()
	var nonce [12]byte
	nonce[4] = 7
	assertBytes(t, "nonce layout", ct[3:], keys.send.Seal(nil, nonce[:], msg, nil))
	// The caller's buffer is reused from packet to packet: what it held
	// before must not leak into the nonce.
	dirty := &Nonce{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	assertBytes(t, "nonce from a used buffer", ct, a.Seal(dirty, []byte("hdr"), 7, msg))
}

func TestKeypairInPlace(t *testing.T) {
	a, b := testKeypairs(t)
	buf := make([]byte, TransportHeaderSize+64+TagSize)
	copy(buf[TransportHeaderSize:], seq(64, 9))
	PutTransportHeader(buf, a.RemoteIndex, 3)
	msg := a.Seal(new(Nonce), buf[:TransportHeaderSize], 3, buf[TransportHeaderSize:TransportHeaderSize+64])
	if &msg[0] != &buf[0] || len(msg) != len(buf) {
		t.Fatal("Seal did not work in place")
	}
	_, c, err := ParseTransportHeader(msg)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := b.Open(new(Nonce), msg[TransportHeaderSize:TransportHeaderSize], c, msg[TransportHeaderSize:])
	if err != nil || !bytes.Equal(pt, seq(64, 9)) {
		t.Fatalf("in-place Open: %v", err)
	}
}

func TestKeypairAllocations(t *testing.T) {
	a, b := testKeypairs(t)
	pt := seq(1420, 0)
	ct := make([]byte, 0, 1420+TagSize)
	out := make([]byte, 0, 1420)
	sealed := a.Seal(new(Nonce), nil, 1, pt)
	nonce := new(Nonce) // the caller's, as a batch's is on the data path
	if n := testing.AllocsPerRun(200, func() { a.Seal(nonce, ct[:0], 1, pt) }); n != 0 {
		t.Errorf("Seal allocates %v times", n)
	}
	if n := testing.AllocsPerRun(200, func() {
		if _, err := b.Open(nonce, out[:0], 1, sealed); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Open allocates %v times", n)
	}
	if n := testing.AllocsPerRun(200, func() { b.Open(nonce, out[:0], 2, sealed) }); n != 0 {
		t.Errorf("failing Open allocates %v times", n)
	}
	if n := testing.AllocsPerRun(200, func() { a.NextCounter() }); n != 0 {
		t.Errorf("NextCounter allocates %v times", n)
	}
}

func TestNextCounterLimit(t *testing.T) {
	a, _ := testKeypairs(t)
	for want := range uint64(3) {
		if c, ok := a.NextCounter(); !ok || c != want {
			t.Fatalf("counter %d, %v; want %d", c, ok, want)
		}
	}
	if a.SendCount() != 3 {
		t.Fatal("SendCount", a.SendCount())
	}
	a.sendCounter.Store(RejectAfterMessages - 2)
	if c, ok := a.NextCounter(); !ok || c != RejectAfterMessages-2 {
		t.Fatal(c, ok)
	}
	if c, ok := a.NextCounter(); !ok || c != RejectAfterMessages-1 {
		t.Fatal("the last counter must be usable", c, ok)
	}
	for range 10 {
		if c, ok := a.NextCounter(); ok {
			t.Fatalf("counter %d handed out past RejectAfterMessages", c)
		}
	}
	if a.SendCount() != RejectAfterMessages {
		t.Fatal("counter moved past the limit:", a.SendCount())
	}
}

// TestNextCounterConcurrent hands out counters from many goroutines: each
// counter once, none past the limit (run with -race).
func TestNextCounterConcurrent(t *testing.T) {
	a, _ := testKeypairs(t)
	const start, perG, goroutines = RejectAfterMessages - 1000, 200, 8
	a.sendCounter.Store(start)
	var mu sync.Mutex
	seen := make(map[uint64]bool)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range perG {
				if c, ok := a.NextCounter(); ok {
					mu.Lock()
					if seen[c] || c >= RejectAfterMessages {
						t.Errorf("counter %d twice or past the limit", c)
					}
					seen[c] = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != 1000 {
		t.Fatalf("%d counters handed out, want 1000", len(seen))
	}
}

func TestKeypairWipe(t *testing.T) {
	a, b := testKeypairs(t)
	ct := a.Seal(new(Nonce), nil, 0, []byte("x"))
	b.Wipe()
	if _, err := b.Open(new(Nonce), nil, 0, ct); !errors.Is(err, ErrKeypairWiped) {
		t.Fatalf("Open after Wipe: %v", err)
	}
	if out := b.Seal(new(Nonce), []byte("hdr"), 0, []byte("x")); string(out) != "hdr" {
		t.Fatal("Seal after Wipe appended")
	}
	if _, ok := b.NextCounter(); ok {
		t.Fatal("NextCounter after Wipe")
	}
}

// A held keypair keeps its send key through a Wipe until the last Release:
// a counter handed out before the wipe is still sealed in full, no new
// counter is handed out, and no new hold is granted.
func TestKeypairWipeWaitsForHolds(t *testing.T) {
	a, b := testKeypairs(t)
	for range 2 {
		if !a.Hold() {
			t.Fatal("Hold on a fresh keypair refused")
		}
	}
	c, ok := a.NextCounter()
	if !ok {
		t.Fatal("no counter")
	}
	a.Wipe()
	if !a.Wiped() {
		t.Fatal("Wiped is false after Wipe")
	}
	if _, ok := a.NextCounter(); ok {
		t.Fatal("NextCounter after Wipe")
	}
	if a.Hold() {
		t.Fatal("Hold granted after Wipe")
	}
	ct := a.Seal(new(Nonce), nil, c, []byte("held"))
	if pt, err := b.Open(new(Nonce), nil, c, ct); err != nil || string(pt) != "held" {
		t.Fatalf("Seal under a hold after Wipe: %x does not open (%v)", ct, err)
	}
	a.Release()
	if out := a.Seal(new(Nonce), nil, c, []byte("x")); len(out) == 0 {
		t.Fatal("keys dropped while a hold remains")
	}
	a.Release()
	if out := a.Seal(new(Nonce), []byte("hdr"), c, []byte("x")); string(out) != "hdr" {
		t.Fatal("keys kept after the last Release of a wiped keypair")
	}
}

// Holds racing a Wipe: whoever comes last drops the keys, and a sender that
// got its hold seals in full (run with -race).
func TestKeypairHoldRacesWipe(t *testing.T) {
	for range 200 {
		a, b := testKeypairs(t)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if !a.Hold() {
					return
				}
				defer a.Release()
				c, ok := a.NextCounter()
				if !ok {
					return
				}
				ct := a.Seal(new(Nonce), nil, c, []byte("payload"))
				if _, err := b.Open(new(Nonce), nil, c, ct); err != nil {
					t.Errorf("counter %d taken under a hold did not seal: %v", c, err)
				}
			})
		}
		a.Wipe()
		wg.Wait()
		if out := a.Seal(new(Nonce), nil, 0, []byte("x")); len(out) != 0 {
			t.Fatal("keys survive the wipe and every release")
		}
	}
}

// TestKeypairConcurrent seals and opens from several goroutines while
// another wipes (run with -race).
func TestKeypairConcurrent(t *testing.T) {
	a, b := testKeypairs(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			buf := make([]byte, 0, 128)
			out := make([]byte, 0, 128)
			for range 200 {
				c, ok := a.NextCounter()
				if !ok {
					return
				}
				ct := a.Seal(new(Nonce), buf[:0], c, seq(64, byte(c)))
				pt, err := b.Open(new(Nonce), out[:0], c, ct)
				if err != nil || !bytes.Equal(pt, seq(64, byte(c))) {
					t.Errorf("counter %d: %v", c, err)
					return
				}
			}
		})
	}
	wg.Wait()
	wg.Go(func() {
		for range 100 {
			a.Seal(new(Nonce), nil, 0, []byte("x"))
		}
	})
	a.Wipe()
	wg.Wait()
}

func TestKeypairsRotation(t *testing.T) {
	kp := func(initiator bool, idx uint32) *Keypair { return &Keypair{Initiator: initiator, LocalIndex: idx} }
	var s Keypairs
	evicted := func(got [2]*Keypair, want ...*Keypair) {
		t.Helper()
		var w [2]*Keypair
		copy(w[:], want)
		if got != w {
			t.Fatalf("evicted %v, want %v", got, w)
		}
	}
	state := func(prev, cur, next *Keypair) {
		t.Helper()
		if s.Previous != prev || s.Current != cur || s.Next != next {
			t.Fatalf("keypairs %+v", s)
		}
	}

	i1, i2 := kp(true, 1), kp(true, 2)
	evicted(s.Install(i1))
	state(nil, i1, nil)
	evicted(s.Install(i2))
	state(i1, i2, nil)
	if s.Lookup(1) != i1 || s.Lookup(2) != i2 || s.Lookup(3) != nil {
		t.Fatal("Lookup")
	}

	// Responder: the new keypair waits in Next; Previous goes at once.
	r3 := kp(false, 3)
	evicted(s.Install(r3), nil, i1)
	state(nil, i2, r3)
	if s.Confirm(i2) != nil || s.Confirm(nil) != nil {
		t.Fatal("Confirm of a keypair other than Next must do nothing")
	}
	state(nil, i2, r3)
	if s.Confirm(r3) != nil {
		t.Fatal("nothing to evict")
	}
	state(i2, r3, nil)

	// A second responder keypair replaces an unconfirmed Next.
	r4, r5 := kp(false, 4), kp(false, 5)
	evicted(s.Install(r4), nil, i2)
	state(nil, r3, r4)
	evicted(s.Install(r5), r4, nil)
	state(nil, r3, r5)

	// An initiator keypair while a Next is pending: the peer may already
	// send under Next, so it becomes Previous and Current is dropped.
	i6 := kp(true, 6)
	evicted(s.Install(i6), nil, r3)
	state(r5, i6, nil)

	r7 := kp(false, 7)
	s.Install(r7)
	if s.Confirm(r7) != nil {
		t.Fatal("Previous was already dropped by Install")
	}
	state(i6, r7, nil)
	evicted(s.Install(nil))
	if got := s.Clear(); got != [3]*Keypair{i6, r7, nil} {
		t.Fatalf("Clear returned %v", got)
	}
	state(nil, nil, nil)
}
