package showfmt

import (
	"bufio"
	"fmt"

	"github.com/fips-go/fips-go/device"
)

// showObfuscation prints the AmneziaWG parameters that are set, one line
// each, as awg(8) shows them.
func showObfuscation(bw *bufio.Writer, o device.Obfuscation) {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"jc", int64(o.Jc)}, {"jmin", int64(o.Jmin)}, {"jmax", int64(o.Jmax)},
		{"s1", int64(o.S1)}, {"s2", int64(o.S2)},
		{"h1", int64(o.H1)}, {"h2", int64(o.H2)}, {"h3", int64(o.H3)}, {"h4", int64(o.H4)},
	} {
		if f.v != 0 {
			fmt.Fprintf(bw, "  %s: %d\n", f.name, f.v)
		}
	}
}
