package tunnel

import (
	"crypto/rand"

	"github.com/fips-go/fips-go/device/noise"
)

// NewPrivateKey returns a new random private key, clamped as Curve25519
// wants it. Its PublicKey method gives the key a peer names it by, and its
// Base64 method the form a config file takes:
//
//	priv := tunnel.NewPrivateKey()
//	fmt.Println(priv.Base64(), priv.PublicKey())
func NewPrivateKey() noise.PrivateKey {
	k, err := noise.GeneratePrivateKey(rand.Reader)
	if err != nil {
		// crypto/rand's Reader does not fail: since Go 1.24 the runtime
		// aborts the program itself when the system's source does.
		panic(err)
	}
	return k
}
