package device_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/ipc"
)

// uapiSet parses a set=1 body as the UAPI server does and applies it.
func uapiSet(t *testing.T, d *device.Device, body string) error {
	t.Helper()
	cfg, err := ipc.ParseSet(strings.NewReader(body+"\n"), 0)
	if err != nil {
		return err
	}
	return d.Apply(cfg)
}

// A UAPI request changes only the obfuscation keys it names, as
// amneziawg-go applies them (so `awg set wg0 jc 5` leaves s1 alone), and
// an invalid combination of what the device has and what the request
// names is refused whole.
func TestObfuscationUAPIKeysOneAtATime(t *testing.T) {
	d := newDevice(t)
	for _, req := range []string{"jc=5\njmin=40\njmax=70\n", "s1=52\n", "h1=1234567891-1234567999\n", "h2=1234568000\n"} {
		if err := uapiSet(t, d, req); err != nil {
			t.Fatalf("%q: %v", req, err)
		}
	}
	want := device.Obfuscation{Jc: 5, Jmin: 40, Jmax: 70, S1: 52,
		H1: 1234567891, H1Max: 1234567999, H2: 1234568000}
	if got := d.Status().Obfuscation; got != want {
		t.Fatalf("after four requests naming one key group each: %+v, want %+v", got, want)
	}
	// s2 = 108 makes the padded response (92 + 108) as long as the padded
	// initiation (148 + 52): refused, although alone it is valid.
	if err := uapiSet(t, d, "s2=108\nlisten_port=4242\n"); !errors.Is(err, device.ErrInvalidConfig) {
		t.Fatalf("s2 clashing with the s1 the device has: %v, want ErrInvalidConfig", err)
	}
	if st := d.Status(); st.Obfuscation != want || st.ListenPort == 4242 {
		t.Fatalf("the refused request changed the device: %+v, port %d", st.Obfuscation, st.ListenPort)
	}
	// Naming a key with 0 turns that one off.
	if err := uapiSet(t, d, "jc=0\njmin=0\njmax=0\n"); err != nil {
		t.Fatal(err)
	}
	want.Jc, want.Jmin, want.Jmax = 0, 0, 0
	if got := d.Status().Obfuscation; got != want {
		t.Fatalf("after jc=0: %+v, want %+v", got, want)
	}
}
