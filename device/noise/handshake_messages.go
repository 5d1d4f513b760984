package noise

import (
	"bytes"
	"fmt"
	"io"
	"time"
)

// The message computations follow the WireGuard paper, section 5.4.2 and
// 5.4.3, with C the chaining key and H the transcript hash. Each works on
// local copies and commits to the Handshake only at the end, so a failure
// anywhere leaves the Handshake untouched.

// CreateInitiation starts a handshake as initiator: a fresh ephemeral key
// from rand, our static key and TAI64N(now) encrypted to the peer. localIndex
// is the sender index the caller reserved in its index table; the response
// will carry it as receiver. MAC1 and MAC2 are left zero for a
// CookieGenerator to fill once the message is marshalled.
func (h *Handshake) CreateInitiation(now time.Time, rand io.Reader, localIndex uint32) (Initiation, error) {
	if err := h.local.usable(); err != nil {
		return Initiation{}, err
	}
	ss, err := h.ss()
	if err != nil {
		return Initiation{}, err
	}
	eph, epub, err := newEphemeral(rand)
	if err != nil {
		return Initiation{}, err
	}
	msg := Initiation{Sender: localIndex, Ephemeral: epub}

	ck := initialChainKey()
	ck = kdf1(ck[:], epub[:])
	hs := mixHash(&h.hash0, epub[:])

	es, err := dh(eph, &h.remote)
	if err != nil {
		return Initiation{}, err
	}
	ck, key := kdf2(ck[:], es[:])
	clear(es[:])
	if _, err := sealZero(&key, msg.Static[:0], h.local.Public[:], hs[:]); err != nil {
		return Initiation{}, err
	}
	hs = mixHash(&hs, msg.Static[:])

	ck, key = kdf2(ck[:], ss[:])
	ts := TAI64N(now)
	_, err = sealZero(&key, msg.Timestamp[:0], ts[:], hs[:])
	clear(key[:])
	if err != nil {
		return Initiation{}, err
	}
	hs = mixHash(&hs, msg.Timestamp[:])

	h.Clear()
	h.state = HandshakeInitiationCreated
	h.hash, h.chainKey = hs, ck
	h.ephemeral = eph
	h.localIndex = localIndex
	h.initiationSent = now
	return msg, nil
}

// InitiationInfo is an initiation decrypted as far as the responder can go
// without knowing the peer: the initiator's static key, which the caller
// uses to find the peer, and the transcript so far.
type InitiationInfo struct {
	Remote PublicKey

	local     *Static
	chainKey  [hashSize]byte
	hash      [hashSize]byte
	ephemeral PublicKey
	sender    uint32
	timestamp [TimestampSize + TagSize]byte // still encrypted
}

// OpenInitiation decrypts the initiator's static key from msg, which must
// have passed the MAC1 check. It changes no state: a message from an
// unknown key, or garbage, costs one DH and returns an error (ErrDecrypt,
// ErrInvalidPublicKey). The caller looks up the peer by info.Remote and
// hands info to that peer's AcceptInitiation.
func OpenInitiation(local *Static, msg *Initiation) (InitiationInfo, error) {
	if err := local.usable(); err != nil {
		return InitiationInfo{}, err
	}
	if msg == nil {
		return InitiationInfo{}, fmt.Errorf("%w: nil initiation", ErrMessageSize)
	}
	epub := PublicKey(msg.Ephemeral)
	ck := initialChainKey()
	ck = kdf1(ck[:], epub[:])
	hs := mixHash(&local.hash0, epub[:])

	es, err := dh(local.x25519, &epub)
	if err != nil {
		return InitiationInfo{}, fmt.Errorf("initiation ephemeral: %w", err)
	}
	ck, key := kdf2(ck[:], es[:])
	clear(es[:])
	var remote PublicKey
	_, err = openZero(&key, remote[:0], msg.Static[:], hs[:])
	clear(key[:])
	if err != nil {
		return InitiationInfo{}, err
	}
	hs = mixHash(&hs, msg.Static[:])
	return InitiationInfo{
		Remote:    remote,
		local:     local,
		chainKey:  ck,
		hash:      hs,
		ephemeral: epub,
		sender:    msg.Sender,
		timestamp: msg.Timestamp,
	}, nil
}

// AcceptInitiation finishes consuming an initiation for this peer: it
// decrypts the timestamp with the static-static secret, which proves the
// sender holds the peer's private key, then refuses a timestamp not newer
// than the last accepted one (ErrReplayedTimestamp) and an initiation less
// than HandshakeInitiationRate after the last accepted one (ErrFlood). On
// success the state is InitiationConsumed; any in-flight initiation of ours
// is abandoned, but LocalIndex still reports its index until CreateResponse
// replaces it, so the caller can free it then.
func (h *Handshake) AcceptInitiation(info *InitiationInfo, now time.Time) error {
	if info == nil || info.local == nil {
		return fmt.Errorf("%w: initiation info not from OpenInitiation", ErrState)
	}
	if !info.Remote.Equal(h.remote) {
		return ErrUnknownPeer
	}
	if err := h.local.usable(); err != nil {
		return err
	}
	ss, err := h.ss()
	if err != nil {
		return err
	}
	ck, key := kdf2(info.chainKey[:], ss[:])
	var ts [TimestampSize]byte
	_, err = openZero(&key, ts[:0], info.timestamp[:], info.hash[:])
	clear(key[:])
	if err != nil {
		return err
	}
	hs := mixHash(&info.hash, info.timestamp[:])

	if bytes.Compare(ts[:], h.lastTimestamp[:]) <= 0 {
		return ErrReplayedTimestamp
	}
	if !h.lastInitiation.IsZero() && now.Sub(h.lastInitiation) < HandshakeInitiationRate {
		return ErrFlood
	}

	index := h.localIndex
	h.Clear()
	h.localIndex = index
	h.state = HandshakeInitiationConsumed
	h.hash, h.chainKey = hs, ck
	h.remoteEphemeral = info.ephemeral
	h.remoteIndex = info.sender
	h.lastTimestamp = ts
	h.lastInitiation = now
	return nil
}

// CreateResponse answers the initiation accepted by AcceptInitiation with a
// fresh ephemeral key from rand. localIndex is the sender index the caller
// reserved; it replaces LocalIndex. MACs are left zero.
func (h *Handshake) CreateResponse(rand io.Reader, localIndex uint32) (Response, error) {
	if h.state != HandshakeInitiationConsumed {
		return Response{}, fmt.Errorf("%w: no initiation to respond to (state %v)", ErrState, h.state)
	}
	eph, epub, err := newEphemeral(rand)
	if err != nil {
		return Response{}, err
	}
	msg := Response{Sender: localIndex, Receiver: h.remoteIndex, Ephemeral: epub}
	hs := mixHash(&h.hash, epub[:])
	ck := kdf1(h.chainKey[:], epub[:])

	ee, err := dh(eph, &h.remoteEphemeral)
	if err != nil {
		return Response{}, fmt.Errorf("initiation ephemeral: %w", err)
	}
	ck = kdf1(ck[:], ee[:])
	clear(ee[:])
	se, err := dh(eph, &h.remote)
	if err != nil {
		return Response{}, err
	}
	ck = kdf1(ck[:], se[:])
	clear(se[:])

	ck, tau, key := kdf3(ck[:], h.psk[:])
	hs = mixHash(&hs, tau[:])
	clear(tau[:])
	_, err = sealZero(&key, msg.Empty[:0], nil, hs[:])
	clear(key[:])
	if err != nil {
		return Response{}, err
	}
	hs = mixHash(&hs, msg.Empty[:])

	h.state = HandshakeResponseCreated
	h.hash, h.chainKey = hs, ck
	h.ephemeral = eph
	h.localIndex = localIndex
	return msg, nil
}

// ConsumeResponse completes a handshake we initiated. It needs state
// InitiationCreated and msg.Receiver == LocalIndex() (ErrState otherwise)
// and refuses a response more than RejectAfterTime after the initiation
// (ErrExpired): the initiator retries every RekeyTimeout and gives up after
// RekeyAttemptTime, so such a response answers an initiation long abandoned.
// A wrong preshared key or a forged message fails with ErrDecrypt.
func (h *Handshake) ConsumeResponse(msg *Response, now time.Time) error {
	if msg == nil {
		return fmt.Errorf("%w: nil response", ErrMessageSize)
	}
	if h.state != HandshakeInitiationCreated || h.ephemeral == nil || msg.Receiver != h.localIndex {
		return fmt.Errorf("%w: response to no initiation of ours", ErrState)
	}
	if now.Sub(h.initiationSent) > RejectAfterTime {
		return ErrExpired
	}
	if err := h.local.usable(); err != nil {
		return err
	}
	epub := PublicKey(msg.Ephemeral)
	hs := mixHash(&h.hash, epub[:])
	ck := kdf1(h.chainKey[:], epub[:])

	ee, err := dh(h.ephemeral, &epub)
	if err != nil {
		return fmt.Errorf("response ephemeral: %w", err)
	}
	ck = kdf1(ck[:], ee[:])
	clear(ee[:])
	se, err := dh(h.local.x25519, &epub)
	if err != nil {
		return fmt.Errorf("response ephemeral: %w", err)
	}
	ck = kdf1(ck[:], se[:])
	clear(se[:])

	ck, tau, key := kdf3(ck[:], h.psk[:])
	hs = mixHash(&hs, tau[:])
	clear(tau[:])
	_, err = openZero(&key, nil, msg.Empty[:], hs[:])
	clear(key[:])
	if err != nil {
		return err
	}
	hs = mixHash(&hs, msg.Empty[:])

	h.state = HandshakeResponseConsumed
	h.hash, h.chainKey = hs, ck
	h.remoteIndex = msg.Sender
	return nil
}
