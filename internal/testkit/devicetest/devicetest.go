// Package devicetest starts devices for tests in other packages: a fresh
// private key, the device closed when the test ends, and the two-device
// fixture (Pair) the tests of every package above device share.
package devicetest

import (
	"crypto/rand"
	"testing"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun"
)

// Key returns a new private key.
func Key(t testing.TB) noise.PrivateKey {
	t.Helper()
	k, err := noise.GeneratePrivateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// New starts a device on td and b with a new private key, closed when the
// test ends, and returns it with the key.
func New(t testing.TB, td tun.Device, b conn.Bind, opts device.Options) (*device.Device, noise.PrivateKey) {
	t.Helper()
	key := Key(t)
	return NewWithKey(t, td, b, key, opts), key
}

// NewWithKey is New with the caller's key.
func NewWithKey(t testing.TB, td tun.Device, b conn.Bind, key noise.PrivateKey, opts device.Options) *device.Device {
	t.Helper()
	d, err := device.New(td, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Apply(&device.Config{PrivateKey: &key}); err != nil {
		t.Fatal(err)
	}
	return d
}
