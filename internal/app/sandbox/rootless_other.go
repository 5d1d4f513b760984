//go:build !linux

package sandbox

// ApplyRootless does nothing outside Linux, as Apply.
func ApplyRootless(RootlessConfig) Status { return Status{Unsupported: true} }
