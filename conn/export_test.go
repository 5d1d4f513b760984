package conn

// Hooks for the external tests (package conn_test) into sizing that is not
// part of the API.

// Sized returns o with the given batch size, GRO buffers and concurrent
// sends (0 leaves a default).
func Sized(o Options, batchSize, groBuffers, sends int) Options {
	o.batchSize, o.groBuffers, o.maxConcurrentSends = batchSize, groBuffers, sends
	return o
}
