package noise

import (
	"crypto/subtle"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// The cookie mechanism (WireGuard paper, section 5.4.7). Every handshake
// message ends in MAC1 and MAC2:
//
//	mac1 = MAC(HASH(LabelMAC1 || receiver's public key), msg up to mac1)
//	mac2 = MAC(cookie, msg up to mac2), or zeros without a fresh cookie
//
// A responder under load answers messages without a valid MAC2 with a cookie
// reply: cookie = MAC(secret, sender's IP address and port), encrypted
// with XChaCha20-Poly1305 under HASH(LabelCookie || responder's public key),
// with the MAC1 being answered as additional data. The secret changes every
// CookieRefreshTime, so cookies expire with it.

// macKeys derives the MAC1 key and the cookie encryption key of a public key.
func macKeys(pub *PublicKey) (mac1Key, cookieKey [hashSize]byte) {
	return blake2sConcat([]byte(LabelMAC1), pub[:]), blake2sConcat([]byte(LabelCookie), pub[:])
}

// macOffsets returns where MAC1 and MAC2 start in a marshalled handshake
// message, or false if msg is too short to hold them.
func macOffsets(msg []byte) (mac1, mac2 int, ok bool) {
	if len(msg) < 2*macSize {
		return 0, 0, false
	}
	return len(msg) - 2*macSize, len(msg) - macSize, true
}

// cookieSource is the address a cookie binds to, encoded as wireguard-go
// does (netip.AddrPort's binary form: 4 or 16 address bytes, any zone,
// then the port little-endian) so cookies match byte for byte.
func cookieSource(buf []byte, src netip.AddrPort) []byte {
	b, err := src.AppendBinary(buf[:0])
	if err != nil {
		return buf[:0] // AppendBinary cannot fail for AddrPort
	}
	return b
}

// CookieChecker is the responder's side: it verifies MAC1 and MAC2 on
// incoming handshake messages and creates cookie replies. It is safe for
// concurrent use.
type CookieChecker struct {
	mac1Key   [hashSize]byte // immutable
	cookieKey [hashSize]byte // immutable
	mac1      macPool        // keyed with mac1Key

	mu        sync.RWMutex // guards rand, secret and secretSet
	rand      io.Reader
	secret    [hashSize]byte
	secretSet time.Time // zero: no secret yet
}

// NewCookieChecker returns a checker for messages addressed to local. rand
// supplies cookie secrets and reply nonces.
func NewCookieChecker(local PublicKey, rand io.Reader) *CookieChecker {
	c := &CookieChecker{rand: rand}
	c.mac1Key, c.cookieKey = macKeys(&local)
	c.mac1.key = c.mac1Key
	return c
}

// CheckMAC1 reports whether msg, a whole marshalled initiation or response,
// carries a valid MAC1 for our public key.
func (c *CookieChecker) CheckMAC1(msg []byte) bool {
	m1, m2, ok := macOffsets(msg)
	if !ok {
		return false
	}
	want := c.mac1.mac(msg[:m1])
	return subtle.ConstantTimeCompare(want[:], msg[m1:m2]) == 1
}

// secretFresh reports whether the current secret may still be used at now.
func (c *CookieChecker) secretFresh(now time.Time) bool {
	return !c.secretSet.IsZero() && now.Sub(c.secretSet) <= CookieRefreshTime
}

// cookieFor is MAC(secret, src). c.mu must be held. It runs for every
// handshake message checked for MAC2 under load, so it allocates nothing.
func (c *CookieChecker) cookieFor(src netip.AddrPort) [macSize]byte {
	var buf [64]byte
	return macStack(c.secret[:], cookieSource(buf[:], src))
}

// CheckMAC2 reports whether msg carries a MAC2 made with the cookie we would
// give src now. It is false when our secret is older than CookieRefreshTime,
// so a sender must fetch a fresh cookie.
func (c *CookieChecker) CheckMAC2(msg []byte, src netip.AddrPort, now time.Time) bool {
	_, m2, ok := macOffsets(msg)
	if !ok {
		return false
	}
	// A sender without a cookie sends zeros, as does every message of a
	// flood that does not answer cookie replies; a real MAC2 is zero with
	// probability 2^-128, and the test reveals nothing secret.
	if isZero(msg[m2:]) {
		return false
	}
	c.mu.RLock()
	if !c.secretFresh(now) {
		c.mu.RUnlock()
		return false
	}
	cookie := c.cookieFor(src)
	c.mu.RUnlock()
	want := macStack(cookie[:], msg[:m2])
	return subtle.ConstantTimeCompare(want[:], msg[m2:]) == 1
}

// CreateReply makes the cookie reply to msg (a whole initiation or
// response received from src, whose sender index is receiver). The secret
// is replaced first if it is older than CookieRefreshTime.
func (c *CookieChecker) CreateReply(msg []byte, receiver uint32, src netip.AddrPort, now time.Time) (CookieReply, error) {
	m1, m2, ok := macOffsets(msg)
	if !ok {
		return CookieReply{}, fmt.Errorf("%w: %d bytes cannot hold MACs", ErrMessageSize, len(msg))
	}
	reply := CookieReply{Receiver: receiver}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.secretFresh(now) {
		var secret [hashSize]byte
		if _, err := io.ReadFull(c.rand, secret[:]); err != nil {
			return CookieReply{}, fmt.Errorf("%w: %w", ErrRandom, err)
		}
		c.secret, c.secretSet = secret, now
	}
	cookie := c.cookieFor(src)
	if _, err := io.ReadFull(c.rand, reply.Nonce[:]); err != nil {
		return CookieReply{}, fmt.Errorf("%w: %w", ErrRandom, err)
	}
	aead, err := chacha20poly1305.NewX(c.cookieKey[:])
	if err != nil {
		return CookieReply{}, fmt.Errorf("noise: XChaCha20-Poly1305 unavailable: %w", err)
	}
	aead.Seal(reply.Cookie[:0], reply.Nonce[:], cookie[:], msg[m1:m2])
	return reply, nil
}

// CookieGenerator is the sender's side for one peer: it adds MAC1 and MAC2
// to our handshake messages and takes in the peer's cookie replies. It is
// safe for concurrent use.
type CookieGenerator struct {
	mac1Key   [hashSize]byte // immutable
	cookieKey [hashSize]byte // immutable

	mu          sync.Mutex // guards the fields below
	cookie      [macSize]byte
	cookieSet   time.Time // zero: no cookie
	lastMAC1    [macSize]byte
	hasLastMAC1 bool
}

// NewCookieGenerator returns a generator for messages to remote.
func NewCookieGenerator(remote PublicKey) *CookieGenerator {
	g := new(CookieGenerator)
	g.mac1Key, g.cookieKey = macKeys(&remote)
	return g
}

// AddMACs fills the MAC1 and MAC2 fields at the end of msg, a whole
// marshalled initiation or response. MAC2 is zeroed unless we hold a cookie
// younger than CookieRefreshTime. The MAC1 is remembered: a cookie reply
// must answer it. msg too short to hold the MACs is left alone.
func (g *CookieGenerator) AddMACs(msg []byte, now time.Time) {
	m1, m2, ok := macOffsets(msg)
	if !ok {
		return
	}
	mac1 := mac(g.mac1Key[:], msg[:m1])
	copy(msg[m1:m2], mac1[:])

	g.mu.Lock()
	defer g.mu.Unlock()
	g.lastMAC1, g.hasLastMAC1 = mac1, true
	if g.cookieSet.IsZero() || now.Sub(g.cookieSet) >= CookieRefreshTime {
		clear(msg[m2:])
		return
	}
	mac2 := mac(g.cookie[:], msg[:m2])
	copy(msg[m2:], mac2[:])
}

// ConsumeReply takes in a cookie reply. It fails with ErrNoCookieRequest if
// we sent no handshake message yet and with ErrDecrypt unless the reply
// answers the last MAC1 we sent (an old or forged reply).
func (g *CookieGenerator) ConsumeReply(r *CookieReply, now time.Time) error {
	if r == nil {
		return fmt.Errorf("%w: nil cookie reply", ErrMessageSize)
	}
	aead, err := chacha20poly1305.NewX(g.cookieKey[:])
	if err != nil {
		return fmt.Errorf("noise: XChaCha20-Poly1305 unavailable: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.hasLastMAC1 {
		return ErrNoCookieRequest
	}
	var cookie [macSize]byte
	if _, err := aead.Open(cookie[:0], r.Nonce[:], r.Cookie[:], g.lastMAC1[:]); err != nil {
		return ErrDecrypt
	}
	g.cookie, g.cookieSet = cookie, now
	return nil
}
