//go:build !darwin && !freebsd

package cli

import (
	"os"

	"github.com/fips-go/fips-go/tun"
)

// createTUN creates the interface of `fips-go IFACE`: the kernel TUN of
// package tun on Linux (and tun.ErrUnsupported where it has none).
func createTUN(name string, mtu int) (tun.Device, error) { return tun.Create(name, mtu) }

// tunFromFile is the daemon child's side of createTUN: the descriptor the
// parent passed on.
func tunFromFile(f *os.File, mtu int) (tun.Device, error) { return tun.CreateFromFile(f, mtu) }
