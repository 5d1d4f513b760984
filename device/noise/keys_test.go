package noise

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// A secret must not reach a log or an error through fmt, whatever the verb
// or however deep in a struct it sits; Base64 is the explicit way out.
func TestSecretKeysRedacted(t *testing.T) {
	var priv PrivateKey
	var psk PresharedKey
	for i := range priv {
		priv[i] = byte(0xa0 + i)
		psk[i] = byte(0x40 + i)
	}
	type status struct {
		Private   PrivateKey
		Preshared PresharedKey
		PrivPtr   *PrivateKey
		PSKs      []PresharedKey
	}
	st := status{priv, psk, &priv, []PresharedKey{psk}}
	secrets := []string{
		base64.StdEncoding.EncodeToString(priv[:]), hex.EncodeToString(priv[:]),
		base64.StdEncoding.EncodeToString(psk[:]), hex.EncodeToString(psk[:]),
		fmt.Sprint(priv[0]), fmt.Sprintf("%#x", priv[0]),
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		for _, v := range []any{priv, psk, &priv, &psk, st, &st} {
			out := fmt.Sprintf(verb, v)
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("Sprintf(%q, %T) = %q: holds key material %q", verb, v, out, s)
				}
			}
		}
	}
	if got := fmt.Sprint(priv, psk); got != "(private key) (preshared key)" {
		t.Errorf("Sprint = %q", got)
	}
	if priv.String() != "(private key)" || psk.String() != "(preshared key)" {
		t.Errorf("String: %q %q", priv.String(), psk.String())
	}
	if got, want := priv.Base64(), secrets[0]; got != want {
		t.Errorf("PrivateKey.Base64 = %q, want %q", got, want)
	}
	if got, want := psk.Base64(), secrets[2]; got != want {
		t.Errorf("PresharedKey.Base64 = %q, want %q", got, want)
	}
}

// Public keys are not secret and keep printing in base64.
func TestPublicKeyPrints(t *testing.T) {
	var pub PublicKey
	pub[0] = 1
	want := base64.StdEncoding.EncodeToString(pub[:])
	if got := fmt.Sprintf("%v", pub); got != want || pub.Base64() != want {
		t.Errorf("%%v = %q, Base64 = %q, want %q", got, pub.Base64(), want)
	}
}
