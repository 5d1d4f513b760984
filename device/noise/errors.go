package noise

import "errors"

// Sentinel errors. Callers branch on them with errors.Is; functions may wrap
// them with more detail.
var (
	// ErrMessageSize: a message does not have the exact length of its type.
	ErrMessageSize = errors.New("noise: wrong message size")
	// ErrMessageType: the first four bytes are not the expected type with
	// three zero reserved bytes.
	ErrMessageType = errors.New("noise: wrong message type")
	// ErrDecrypt: an AEAD tag did not verify (wrong key, tampered or garbage
	// message).
	ErrDecrypt = errors.New("noise: message authentication failed")
	// ErrReplayedTimestamp: an initiation's timestamp is not newer than the
	// newest one already accepted from that peer.
	ErrReplayedTimestamp = errors.New("noise: replayed handshake timestamp")
	// ErrFlood: an initiation came less than HandshakeInitiationRate after the
	// last one accepted from that peer.
	ErrFlood = errors.New("noise: handshake initiation flood")
	// ErrUnknownPeer: an initiation was handed to the handshake of a peer
	// other than the one whose static key it carries.
	ErrUnknownPeer = errors.New("noise: initiation is from another peer")
	// ErrState: the handshake is not in the state the call needs (for
	// example a response for an initiation we did not send).
	ErrState = errors.New("noise: unexpected handshake state")
	// ErrExpired: a response arrived for an initiation older than
	// RejectAfterTime.
	ErrExpired = errors.New("noise: handshake expired")
	// ErrNoPrivateKey: the device has no private key yet.
	ErrNoPrivateKey = errors.New("noise: no local private key")
	// ErrInvalidPublicKey: a Diffie-Hellman result was all zeros, so the
	// remote key (static or ephemeral) is a low-order point.
	ErrInvalidPublicKey = errors.New("noise: invalid public key")
	// ErrRandom: the random source failed.
	ErrRandom = errors.New("noise: reading randomness")
	// ErrNoCookieRequest: a cookie reply arrived but no MAC1 was sent that it
	// could answer.
	ErrNoCookieRequest = errors.New("noise: cookie reply without a handshake sent")
	// ErrKeypairWiped: Open on a keypair whose keys were wiped.
	ErrKeypairWiped = errors.New("noise: keypair wiped")
	// ErrIndexSpace: no free receiver index was found.
	ErrIndexSpace = errors.New("noise: no free receiver index")
)
