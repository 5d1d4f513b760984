//go:build !linux && !windows

package tun

import "syscall"

func closeFD(fd int) { syscall.Close(fd) }
