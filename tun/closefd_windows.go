package tun

import "syscall"

// closeFD closes what CreateDetached was given: on Windows a descriptor is a
// handle.
func closeFD(fd int) { syscall.Close(syscall.Handle(fd)) }
