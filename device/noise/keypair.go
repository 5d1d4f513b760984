package noise

import (
	"crypto/cipher"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/internal/chachapoly"
	"golang.org/x/crypto/chacha20poly1305"
)

// Keypair is the pair of transport keys one handshake produced. Seal, Open,
// NextCounter and SendCount are safe for concurrent use (each caller with
// its own Nonce) and allocate nothing; the exported fields are set by
// DeriveKeypair and read-only after.
type Keypair struct {
	LocalIndex  uint32 // receiver index peers put on messages to us
	RemoteIndex uint32 // receiver index we put on messages to the peer
	Created     time.Time
	Initiator   bool

	keys        atomic.Pointer[transportKeys] // nil once wiped
	sendCounter atomic.Uint64
	// holds counts senders between Hold and Release: counters they were
	// handed are not sealed yet, so the keys must outlive them. retired is
	// set by Wipe; the last Release of a retired keypair drops the keys.
	holds   atomic.Int64
	retired atomic.Bool
}

// Nonce is the buffer Seal and Open build the AEAD's 12-byte nonce in; the
// caller owns it, one per goroutine (the data path keeps one in each
// batch). A nonce on the stack would be moved to the heap on every call,
// because cipher.AEAD is an interface and escape analysis must assume its
// methods keep their arguments; a sync.Pool of them, used before, cost
// four pool operations a packet.
type Nonce [chacha20poly1305.NonceSize]byte

// set writes counter into the nonce: four zero bytes, then the counter
// little-endian.
func (n *Nonce) set(counter uint64) []byte {
	n[0], n[1], n[2], n[3] = 0, 0, 0, 0
	binary.LittleEndian.PutUint64(n[4:], counter)
	return n[:]
}

type transportKeys struct {
	send, recv cipher.AEAD
}

func newKeypair(send, recv *[hashSize]byte) (*Keypair, error) {
	s, err := chachapoly.New(send[:])
	if err != nil {
		return nil, err
	}
	r, err := chachapoly.New(recv[:])
	if err != nil {
		return nil, err
	}
	kp := new(Keypair)
	kp.keys.Store(&transportKeys{send: s, recv: r})
	return kp, nil
}

// NextCounter reserves the next send counter (the nonce). It reports false
// once RejectAfterMessages counters were handed out (or the keypair was
// wiped): the keypair must not send any more.
func (k *Keypair) NextCounter() (uint64, bool) {
	for {
		n := k.sendCounter.Load()
		if n >= RejectAfterMessages {
			return 0, false
		}
		// A compare-and-swap rather than an add: the counter must never
		// move past the limit, however many callers race at it.
		if k.sendCounter.CompareAndSwap(n, n+1) {
			return n, true
		}
	}
}

// SendCount is how many send counters were handed out, for the rekey rule
// (RekeyAfterMessages).
func (k *Keypair) SendCount() uint64 { return k.sendCounter.Load() }

// Seal encrypts plaintext with the send key and counter and appends the
// ciphertext and tag to dst, like cipher.AEAD.Seal without additional data.
// To encrypt in place, plaintext must start where the output does
// (dst = buf[:16], plaintext = buf[16:16+n]). n is the caller's scratch
// for the nonce (see Nonce). A wiped keypair appends
// nothing: callers must check that the output is the full ciphertext, and
// hold the keypair (Hold) from taking a counter until sealing is done.
func (k *Keypair) Seal(n *Nonce, dst []byte, counter uint64, plaintext []byte) []byte {
	keys := k.keys.Load()
	if keys == nil {
		return dst
	}
	return keys.send.Seal(dst, n.set(counter), plaintext, nil)
}

// SendAEAD is the send cipher, nil once wiped. It exists for wire audits in
// tests, which must check that every transport message authenticates; the
// data path uses Seal.
func (k *Keypair) SendAEAD() cipher.AEAD {
	if keys := k.keys.Load(); keys != nil {
		return keys.send
	}
	return nil
}

// Open decrypts ciphertext (including its tag) with the receive key and
// counter, appending the plaintext to dst like cipher.AEAD.Open. It returns
// ErrDecrypt if authentication fails. The replay check is the caller's.
// n is the caller's scratch for the nonce (see Nonce).
func (k *Keypair) Open(n *Nonce, dst []byte, counter uint64, ciphertext []byte) ([]byte, error) {
	keys := k.keys.Load()
	if keys == nil {
		return nil, ErrKeypairWiped
	}
	out, err := keys.recv.Open(dst, n.set(counter), ciphertext, nil)
	if err != nil {
		return nil, ErrDecrypt
	}
	return out, nil
}

// Hold keeps the send key alive until the matching Release, so that every
// counter NextCounter hands out meanwhile can still be sealed. It reports
// false, and holds nothing, once the keypair is wiped: the caller must not
// send with it.
func (k *Keypair) Hold() bool {
	k.holds.Add(1)
	if k.retired.Load() {
		k.Release()
		return false
	}
	return true
}

// Release ends a Hold. The last one after a Wipe drops the keys.
func (k *Keypair) Release() {
	if k.holds.Add(-1) == 0 && k.retired.Load() {
		k.keys.Store(nil)
	}
}

// Wipe retires the keypair (the key-zeroing timer, a rotation, or the
// peer's removal): NextCounter reports false from now on, and the keys are
// dropped at once or, if a sender holds the keypair, when the last hold is
// released, so a packet that was given a counter is always sealed in full.
// Open fails with ErrKeypairWiped once the keys are gone. The AEADs keep
// key copies (x/crypto's, which serves short messages, cannot be zeroed);
// dropping the last reference is the most Go allows.
func (k *Keypair) Wipe() {
	k.sendCounter.Store(RejectAfterMessages)
	k.retired.Store(true)
	if k.holds.Load() == 0 {
		k.keys.Store(nil)
	}
}

// Wiped reports whether Wipe was called, whether or not a hold still keeps
// the keys.
func (k *Keypair) Wiped() bool { return k.retired.Load() }

// Keypairs is a peer's previous, current and next keypair. It is plain state
// without a lock: the device guards it.
//
// Current is what we send with. Next is a responder's keypair that is not
// yet confirmed: the initiator may not have our response, so we must not
// send with it until the first message arrives under it (Confirm). Previous
// still decrypts messages in flight from before the last rotation.
type Keypairs struct {
	Previous, Current, Next *Keypair
}

// Install adds a freshly derived keypair. An initiator's (k.Initiator) is
// confirmed already, since the response proved the peer has it: it becomes
// Current, and the old Current (or a pending Next, which the peer may have
// started using) becomes Previous. A responder's becomes Next and Previous is
// dropped. It returns the keypairs dropped, so the caller frees their
// indices; unused entries are nil.
func (s *Keypairs) Install(k *Keypair) (evicted [2]*Keypair) {
	if k == nil {
		return evicted
	}
	if k.Initiator {
		if s.Next != nil {
			evicted = [2]*Keypair{s.Previous, s.Current}
			s.Previous = s.Next
			s.Next = nil
		} else {
			evicted = [2]*Keypair{s.Previous, nil}
			s.Previous = s.Current
		}
		s.Current = k
		return evicted
	}
	evicted = [2]*Keypair{s.Next, s.Previous}
	s.Next = k
	s.Previous = nil
	return evicted
}

// Confirm is called with the keypair the first message of a session
// decrypted under. If that is Next, Next becomes Current, Current becomes
// Previous and the old Previous is returned to be freed. Otherwise nothing
// changes and it returns nil.
func (s *Keypairs) Confirm(k *Keypair) (evicted *Keypair) {
	if k == nil || k != s.Next {
		return nil
	}
	evicted = s.Previous
	s.Previous = s.Current
	s.Current = s.Next
	s.Next = nil
	return evicted
}

// Clear removes all keypairs and returns them (nil entries for empty slots).
func (s *Keypairs) Clear() (evicted [3]*Keypair) {
	evicted = [3]*Keypair{s.Previous, s.Current, s.Next}
	*s = Keypairs{}
	return evicted
}

// Lookup returns which of the three keypairs has local index idx, or nil.
func (s *Keypairs) Lookup(idx uint32) *Keypair {
	for _, k := range [3]*Keypair{s.Current, s.Previous, s.Next} {
		if k != nil && k.LocalIndex == idx {
			return k
		}
	}
	return nil
}
