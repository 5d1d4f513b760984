//go:build darwin || freebsd

package cli

import (
	"fmt"
	"os"

	"github.com/fips-go/fips-go/tun"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// On macOS and FreeBSD the interface comes from wireguard-go's tun package
// (utun, and FreeBSD's tun), behind our contract through
// tun.FromWireGuard: there are no offloads there to split or coalesce. Built, not tested here.

// envTunNameFile is where wg-quick on macOS wants the interface's real
// name: it asks for "utun" and the kernel picks the number.
const envTunNameFile = "WG_TUN_NAME_FILE"

func createTUN(name string, mtu int) (tun.Device, error) {
	w, err := wgtun.CreateTUN(name, mtu)
	if err != nil {
		return nil, err
	}
	t := tun.FromWireGuard(w)
	if path := os.Getenv(envTunNameFile); path != "" {
		real, err := t.Name()
		if err == nil {
			err = os.WriteFile(path, []byte(real+"\n"), 0o600)
		}
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("%s: %w", envTunNameFile, err)
		}
	}
	return t, nil
}

func tunFromFile(f *os.File, mtu int) (tun.Device, error) {
	w, err := wgtun.CreateTUNFromFile(f, mtu)
	if err != nil {
		return nil, err
	}
	return tun.FromWireGuard(w), nil
}
