//go:build !linux

package device

import "syscall"

// errTUNDetached: other platforms report a deleted TUN as ENODEV or a closed
// file, which tunGone checks already.
var errTUNDetached error = syscall.ENODEV
