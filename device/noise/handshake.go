package noise

import (
	"crypto/ecdh"
	"fmt"
	"time"
)

// HandshakeState is where a peer's handshake stands.
type HandshakeState int

// The handshake states. An initiator goes None, InitiationCreated,
// ResponseConsumed; a responder None (or any state: a peer's initiation
// replaces our own in-flight one), InitiationConsumed, ResponseCreated.
// DeriveKeypair and Clear return to None.
const (
	HandshakeNone HandshakeState = iota
	HandshakeInitiationCreated
	HandshakeInitiationConsumed
	HandshakeResponseCreated
	HandshakeResponseConsumed
)

func (s HandshakeState) String() string {
	switch s {
	case HandshakeNone:
		return "none"
	case HandshakeInitiationCreated:
		return "initiation created"
	case HandshakeInitiationConsumed:
		return "initiation consumed"
	case HandshakeResponseCreated:
		return "response created"
	case HandshakeResponseConsumed:
		return "response consumed"
	}
	return fmt.Sprintf("HandshakeState(%d)", int(s))
}

// Handshake is one peer's side of the Noise_IKpsk2 handshake. It is plain
// state: methods take the time and the randomness they need, and it is not
// safe for concurrent use (the device holds a per-peer lock). Every method
// that returns an error leaves the Handshake exactly as it was.
type Handshake struct {
	state  HandshakeState
	local  *Static // nil until the device has a private key
	remote PublicKey
	psk    PresharedKey

	// *handshakeWork is nil until the first handshake with this peer:
	// most of a gateway's configured peers may never handshake, and each
	// would carry 0.2 KiB of it. Every field of it is read only after the
	// first handshake method allocated it (work), or through a nil check.
	*handshakeWork

	// Replay and flood protection for initiations we accept; these survive
	// Clear and SetLocal because they are about the remote's clock.
	lastTimestamp  [TimestampSize]byte
	lastInitiation time.Time
}

// handshakeWork is the part of a Handshake that only handshaking needs; it
// stays once allocated.
type handshakeWork struct {
	// staticStatic is DH(local static, remote static), computed by the
	// first handshake that needs it and kept until either key changes
	// (ssDone); ssErr says why it is unusable. Not when a key is set: a
	// gateway given 100,000 peers and its private key spent 3 of its 3.5 s
	// of `wg setconf` on one X25519 per peer, most of which would never
	// handshake. An initiation can make the responder compute it for a
	// configured peer's key at most once.
	staticStatic [hashSize]byte
	ssDone       bool
	ssErr        error
	// hash0 is the transcript hash initiations we send start from: H_0
	// mixed with the remote's public key.
	hash0 [hashSize]byte

	// The in-flight handshake.
	hash, chainKey  [hashSize]byte
	ephemeral       *ecdh.PrivateKey // our ephemeral key, nil when none
	remoteEphemeral PublicKey
	localIndex      uint32
	remoteIndex     uint32
	initiationSent  time.Time // when our in-flight initiation was created
}

// work allocates the handshake's working state on first use.
func (h *Handshake) work() *handshakeWork {
	if h.handshakeWork == nil {
		h.handshakeWork = &handshakeWork{hash0: initialHash(&h.remote)}
	}
	return h.handshakeWork
}

// NewHandshake prepares the handshake with the peer whose static key is
// remote. local may be nil while the device has no private key; the handshake
// then refuses to create or accept messages with ErrNoPrivateKey.
func NewHandshake(local *Static, remote PublicKey, psk PresharedKey) *Handshake {
	h := &Handshake{remote: remote, psk: psk}
	h.setLocal(local)
	return h
}

func (h *Handshake) setLocal(local *Static) {
	h.local = local
	if h.handshakeWork != nil {
		clear(h.staticStatic[:])
		h.ssDone, h.ssErr = false, nil
	}
}

// ss returns the static-static DH, computing it the first time.
func (h *Handshake) ss() (*[hashSize]byte, error) {
	h.work()
	if !h.ssDone {
		h.ssDone = true
		if h.ssErr = h.local.usable(); h.ssErr == nil {
			ss, err := dh(h.local.x25519, &h.remote)
			if err != nil {
				h.ssErr = fmt.Errorf("%w: peer static key is a low-order point", err)
			} else {
				h.staticStatic = ss
			}
		}
	}
	return &h.staticStatic, h.ssErr
}

// SetLocal installs a new local identity (the private key changed, or was
// removed with nil). It drops the static-static DH (the next handshake
// computes it anew) and abandons any in-flight handshake, whose keys
// depended on the old identity.
func (h *Handshake) SetLocal(local *Static) {
	h.setLocal(local)
	h.Clear()
}

// SetPresharedKey changes the preshared key for the next response created or
// consumed.
func (h *Handshake) SetPresharedKey(psk PresharedKey) { h.psk = psk }

// PresharedKey returns the preshared key (all zeros when none).
func (h *Handshake) PresharedKey() PresharedKey { return h.psk }

// Remote returns the peer's static public key.
func (h *Handshake) Remote() PublicKey { return h.remote }

// State returns the handshake state.
func (h *Handshake) State() HandshakeState { return h.state }

// LocalIndex returns the receiver index of the in-flight handshake (the
// sender index of the message we created), or 0 if there is none. The caller
// owns the index table entry and frees it when the index changes.
func (h *Handshake) LocalIndex() uint32 {
	if h.handshakeWork == nil {
		return 0
	}
	return h.localIndex
}

// Clear forgets the in-flight handshake and zeroes its secrets; the
// key-zeroing timer calls it. The replay and flood state is kept.
func (h *Handshake) Clear() {
	h.state = HandshakeNone
	if h.handshakeWork == nil {
		return // never handshook: no secrets
	}
	clear(h.hash[:])
	clear(h.chainKey[:])
	clear(h.remoteEphemeral[:])
	// crypto/ecdh keeps its own copy of the scalar that cannot be zeroed;
	// dropping the reference is the most Go allows.
	h.ephemeral = nil
	h.localIndex = 0
	h.remoteIndex = 0
	h.initiationSent = time.Time{}
	h.state = HandshakeNone
}

// DeriveKeypair turns a completed handshake into transport keys: after
// ConsumeResponse (initiator) or CreateResponse (responder). The keypair
// takes over LocalIndex (the caller repoints its index table entry to it),
// the handshake secrets are wiped and the state returns to None.
func (h *Handshake) DeriveKeypair(now time.Time) (*Keypair, error) {
	var send, recv [hashSize]byte
	var initiator bool
	switch h.state {
	case HandshakeResponseConsumed:
		send, recv = kdf2(h.chainKey[:], nil)
		initiator = true
	case HandshakeResponseCreated:
		recv, send = kdf2(h.chainKey[:], nil)
	default:
		return nil, fmt.Errorf("%w: cannot derive keys in state %v", ErrState, h.state)
	}
	kp, err := newKeypair(&send, &recv)
	clear(send[:])
	clear(recv[:])
	if err != nil {
		return nil, err
	}
	kp.LocalIndex = h.localIndex
	kp.RemoteIndex = h.remoteIndex
	kp.Created = now
	kp.Initiator = initiator
	h.Clear()
	return kp, nil
}
