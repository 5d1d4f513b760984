package device

import (
	"net/netip"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/noise"
)

// Config is one configuration change, as a UAPI set=1 request or a config
// file describes it. Nil pointers mean "leave as is". A Config is validated
// as a whole before any of it is applied, and applied atomically: either all
// of it takes effect or none does.
type Config struct {
	PrivateKey   *noise.PrivateKey // all zeros removes the key
	ListenPort   *uint16
	FwMark       *uint32 // 0 removes the mark
	ReplacePeers bool
	Peers        []PeerConfig
	// Obfuscation, when set, replaces the AmneziaWG parameters whole, or
	// only those ObfuscationKeys names.
	Obfuscation *Obfuscation
	// ObfuscationKeys, when not empty, makes Obfuscation change only the
	// parameters it names, by amneziawg-go's UAPI keys in lower case ("jc",
	// "jmin", "jmax", "s1" to "s4", "h1" to "h4", "i1" to "i5"; "h1" is H1
	// and H1Max): the others keep their values, as amneziawg-go applies a
	// UAPI request. The parameters that result are checked as a whole.
	ObfuscationKeys []string
	// StreamListen, when set, turns the TCP listener for peers' streams
	// on or off.
	StreamListen *StreamListen
	// Proxy, when set, is the HTTP CONNECT proxy streams are dialed
	// through, http://[user:password@]host[:port] ("": none).
	Proxy *string
	// TLSCertificate, when set, is the certificate the stream listener
	// serves to TLS clients; an empty one goes back to a self-signed
	// certificate made in memory.
	TLSCertificate *TLSCertificate
}

// TLSCertificate is a PEM certificate chain and its PEM private key.
type TLSCertificate struct {
	CertPEM, KeyPEM []byte
}

// PeerConfig changes one peer, identified by its public key.
type PeerConfig struct {
	PublicKey noise.PublicKey
	// Remove deletes the peer; other fields are ignored.
	Remove bool
	// UpdateOnly changes the peer only if it exists already.
	UpdateOnly   bool
	PresharedKey *noise.PresharedKey // all zeros removes it
	Endpoint     *netip.AddrPort
	// PersistentKeepalive in seconds; 0 turns it off.
	PersistentKeepalive *uint16
	ReplaceAllowedIPs   bool
	AllowedIPs          []AllowedIPChange
	// ProtocolVersion, when set, must be 1.
	ProtocolVersion *int
	// Transport, when set, is how datagrams to the configured endpoint
	// travel: UDP, or a TCP or TLS stream the device dials, or auto.
	Transport *conn.Transport
	// PathProbes, when set, turns path-MTU probes on or off for this peer
	// (Options.PathProbes is the default for peers that never say): on
	// for peers that run fips-go, off for stock ones.
	PathProbes *bool
	// TLSServerName, when set, is the server name (SNI) a TLS stream to
	// the peer sends; "" sends none (the default).
	TLSServerName *string
}

// AllowedIPChange adds a prefix to a peer, or with Remove takes that one
// prefix away from it.
type AllowedIPChange struct {
	Prefix netip.Prefix
	Remove bool
}

// Status is a snapshot of the device for UAPI get=1 and `fips-go show`.
type Status struct {
	PrivateKey noise.PrivateKey // zero when unset
	PublicKey  noise.PublicKey  // zero when unset
	ListenPort uint16
	FwMark     uint32
	// Obfuscation is zero when off.
	Obfuscation Obfuscation
	// StreamListen is the stream listener as configured, StreamPort the
	// TCP port it listens on (0: none).
	StreamListen StreamListen
	StreamPort   uint16
	// Proxy is the HTTP proxy streams are dialed through ("": none).
	Proxy string
	// TLSCertPEM is the certificate chain the stream listener serves when
	// one was given (nil: a self-signed one).
	TLSCertPEM []byte
	Peers      []PeerStatus
	// Counters are fips-go's own counters (drops by reason, handshakes,
	// offload fallbacks), in a stable order, name then value.
	Counters []Counter
}

// PeerStatus is one peer in a Status.
type PeerStatus struct {
	PublicKey           noise.PublicKey
	PresharedKey        noise.PresharedKey
	Endpoint            netip.AddrPort // zero when unknown
	LastHandshake       time.Time      // zero when none
	TxBytes, RxBytes    uint64
	PersistentKeepalive uint16
	AllowedIPs          []netip.Prefix
	ProtocolVersion     int
	// PathMTU is the largest datagram the path to the endpoint is known
	// to carry (0: unknown), PathMTUSource how it was learned ("kernel",
	// "probe"; "unknown" with 0). fips-go's own: wg never sees them.
	PathMTU       int
	PathMTUSource string
	// Transport is the transport of the peer's current endpoint,
	// TransportSetting the one configured (auto chooses Transport), and
	// ViaProxy whether the current stream was dialed through the proxy.
	Transport        conn.Transport
	TransportSetting conn.Transport
	ViaProxy         bool
	// TLSServerName is the configured SNI ("" when none).
	TLSServerName string
	// PathProbes is the peer's own probe setting (nil: the device's
	// default), PathProbesOn whether its path is probed.
	PathProbes   *bool
	PathProbesOn bool
}

// Counter is one named cumulative counter.
type Counter struct {
	Name  string
	Value uint64
}
