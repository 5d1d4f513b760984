//go:build !linux

package tun

import "syscall"

// goneErrnos are the read errors of a TUN whose interface is gone.
var goneErrnos = [...]syscall.Errno{syscall.ENODEV, syscall.EIO}
