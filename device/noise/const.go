package noise

import "time"

// Protocol constants from the WireGuard paper, section 6.
const (
	RekeyAfterMessages  uint64 = 1 << 60
	RejectAfterMessages uint64 = ^uint64(0) - (1 << 13)

	RekeyAfterTime   = 120 * time.Second
	RejectAfterTime  = 180 * time.Second
	RekeyAttemptTime = 90 * time.Second
	RekeyTimeout     = 5 * time.Second
	KeepaliveTimeout = 10 * time.Second
	// RekeyTimeoutJitterMax is the most random delay added to RekeyTimeout.
	RekeyTimeoutJitterMax = 333 * time.Millisecond
	// CookieRefreshTime is how long a cookie secret, and a received cookie, stay valid.
	CookieRefreshTime = 120 * time.Second
	// HandshakeInitiationRate is the least time between two initiations
	// accepted from one peer (flood protection).
	HandshakeInitiationRate = time.Second / 50
)

// The strings that bind the handshake to WireGuard (paper, section 5.4):
// Construction and Identifier seed the initial chaining key and hash, the
// labels domain-separate the MAC1 key and the cookie encryption key.
const (
	Construction = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s"
	Identifier   = "WireGuard v1 zx2c4 Jason@zx2c4.com"
	LabelMAC1    = "mac1----"
	LabelCookie  = "cookie--"
)
