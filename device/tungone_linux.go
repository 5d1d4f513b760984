package device

import "syscall"

// errTUNDetached is what a Linux TUN fd answers once its netdev is
// unregistered (the interface or its namespace deleted).
var errTUNDetached error = syscall.EBADFD
