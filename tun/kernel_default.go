//go:build !linux

package tun

import "os"

func createKernel(name string, mtu int) (Device, error) { return nil, ErrUnsupported }

func createKernelFromFile(f *os.File, mtu int) (Device, error) { return nil, ErrUnsupported }

func createDetached(fd int, mtu int) (Device, error) {
	closeFD(fd)
	return nil, ErrUnsupported
}
