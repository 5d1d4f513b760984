package tun

import (
	"fmt"
	"os"

	wgtun "golang.zx2c4.com/wireguard/tun"
)

// createKernel opens /dev/net/tun through wireguard-go's tun package, which
// turns on IFF_VNET_HDR and the TSO (and, from Linux 6.2, USO) offloads: one
// read then returns up to 64 KiB of TCP that it splits into packets, which is
// what makes a kernel TUN fast.
func createKernel(name string, mtu int) (Device, error) {
	d, err := wgtun.CreateTUN(name, mtu)
	if err != nil {
		return nil, fmt.Errorf("tun: create %q: %w", name, err)
	}
	return kernelDevice{d}, nil
}

func createKernelFromFile(f *os.File, mtu int) (Device, error) {
	d, err := wgtun.CreateTUNFromFile(f, mtu)
	if err != nil {
		return nil, fmt.Errorf("tun: open TUN from %s: %w", f.Name(), err)
	}
	return kernelDevice{d}, nil
}

// kernelDevice makes Write return a packet count as the Device contract
// says: wireguard-go's Linux TUN returns the number of bytes written.
type kernelDevice struct{ wgtun.Device }

// Write implements Device. On error no count of packets is known, so it
// reports 0 along with the error.
func (d kernelDevice) Write(bufs [][]byte, offset int) (int, error) {
	if _, err := d.Device.Write(bufs, offset); err != nil {
		return 0, err
	}
	return len(bufs), nil
}
