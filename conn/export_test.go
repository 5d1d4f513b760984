package conn

import (
	"time"

	"github.com/fips-go/fips-go/conn/internal/srclimit"
)

// Hooks for the external tests (package conn_test) into sizing that is not
// part of the API.

// Sized returns o with the given batch size, GRO buffers and concurrent
// sends (0 leaves a default).
func Sized(o Options, batchSize, groBuffers, sends int) Options {
	o.batchSize, o.groBuffers, o.maxConcurrentSends = batchSize, groBuffers, sends
	return o
}

// StreamTuning is the Stream's test-only limits (0 keeps a default).
type StreamTuning struct {
	MaxUnproven, UnprovenFrames, QueueBytes int
	ProveTimeout, DialBackoff               time.Duration
	// TLSBurst and TLSEvery are the per-source limit on TLS handshakes.
	TLSBurst int
	TLSEvery time.Duration
}

// TunedStream returns options with t's limits.
func TunedStream(t StreamTuning) StreamOptions {
	return StreamOptions{maxUnproven: t.MaxUnproven, unprovenFrames: t.UnprovenFrames,
		queueBytes: t.QueueBytes, proveTimeout: t.ProveTimeout, dialBackoff: t.DialBackoff,
		tlsLimit: srclimit.Options{Burst: t.TLSBurst, Every: t.TLSEvery}}
}

// OpenConns is how many connections s holds or dials.
func (s *Stream) OpenConns() int { return s.openConns() }

// SelfSignedCertificate is the certificate a Stream makes for itself.
var SelfSignedCertificate = selfSigned
