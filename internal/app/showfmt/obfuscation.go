package showfmt

import (
	"bufio"
	"encoding/base64"
	"fmt"

	"github.com/fips-go/fips-go/device"
)

// showObfuscation prints the AmneziaWG parameters that are set, one line
// each, as awg(8) shows them.
func showObfuscation(bw *bufio.Writer, o device.Obfuscation) {
	rng := func(lo, hi uint32) string {
		if lo == 0 && hi == 0 {
			return ""
		}
		if hi == 0 || hi == lo {
			return fmt.Sprint(lo)
		}
		return fmt.Sprintf("%d-%d", lo, hi)
	}
	num := func(n int) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprint(n)
	}
	for _, f := range []struct{ name, v string }{
		{"jc", num(o.Jc)}, {"jmin", num(o.Jmin)}, {"jmax", num(o.Jmax)},
		{"s1", num(o.S1)}, {"s2", num(o.S2)}, {"s3", num(o.S3)}, {"s4", num(o.S4)},
		{"h1", rng(o.H1, o.H1Max)}, {"h2", rng(o.H2, o.H2Max)}, {"h3", rng(o.H3, o.H3Max)}, {"h4", rng(o.H4, o.H4Max)},
		{"i1", o.I1}, {"i2", o.I2}, {"i3", o.I3}, {"i4", o.I4}, {"i5", o.I5},
		{"header protection key", hpKey(o.HeaderProtectionKey)},
	} {
		if f.v != "" {
			fmt.Fprintf(bw, "  %s: %s\n", f.name, f.v)
		}
	}
}

// hpKey is the header protection key in base64, as awg(8) shows it ("" if
// unset); like a preshared key, both ends hold it.
func hpKey(k [32]byte) string {
	if k == ([32]byte{}) {
		return ""
	}
	return base64.StdEncoding.EncodeToString(k[:])
}
