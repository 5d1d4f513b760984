package conn

import "time"

// WithWriteTimeout returns o with the time a connection may spend in one
// blocked write before it is closed (0 keeps the default), for the tests
// of a peer that stops reading.
func WithWriteTimeout(o StreamOptions, d time.Duration) StreamOptions {
	o.writeTimeout = d
	return o
}
