//go:build !linux

package sandbox

// Apply does nothing outside Linux: capabilities, no_new_privs, Landlock
// and seccomp are Linux's, and the daemon here runs as its platform's
// wireguard-go does.
func Apply(Config) Status { return Status{Unsupported: true} }

// LimitBounding does nothing outside Linux.
func LimitBounding([]Capability) error { return nil }
