// Package tuning reaches sizing knobs of the public packages that are not
// part of their API, for the module's own tests and benchmarks in other
// packages (a test in the same package sets the unexported field itself).
// The public package installs each hook when it is initialized, so a
// caller that imports it finds the hook set.
package tuning

// Device is device.Options' pool and queue sizing; zero leaves a default.
type Device struct {
	BatchSize      int
	Batches        int
	SmallBatches   int
	HandshakeQueue int
	StagingBuffers int
}

// SetDevice applies t to o, a *device.Options.
var SetDevice func(o any, t Device)
