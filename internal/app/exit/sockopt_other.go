//go:build !unix

package exit

// noBroadcast does nothing where the exit is only built, not run.
func noBroadcast(uintptr) error { return nil }
