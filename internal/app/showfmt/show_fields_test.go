package showfmt_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/app/showfmt"
)

// The expected lines follow wireguard-tools' src/show.c (ugly_print): keys
// unmasked, peers in UAPI order, allowed IPs space-separated.
func TestFormatField(t *testing.T) {
	st := showStatus()
	priv, pub := b64(1), st.PublicKey.String()
	hs := itoa(st.Peers[0].LastHandshake.Unix())
	cases := map[string]string{
		"public-key":     pub + "\n",
		"private-key":    priv + "\n",
		"listen-port":    "51820\n",
		"fwmark":         "0x20\n",
		"peers":          b64(2) + "\n" + b64(4) + "\n" + b64(5) + "\n",
		"preshared-keys": b64(2) + "\t" + b64(3) + "\n" + b64(4) + "\t(none)\n" + b64(5) + "\t(none)\n",
		"endpoints":      b64(2) + "\t192.0.2.1:51820\n" + b64(4) + "\t(none)\n" + b64(5) + "\t[fe80::1%eth0]:51820\n",
		"allowed-ips":    b64(2) + "\t10.0.0.0/8 fd00::/64\n" + b64(4) + "\t(none)\n" + b64(5) + "\t::/0\n",
		"latest-handshakes": b64(2) + "\t" + hs + "\n" + b64(4) + "\t1699999937\n" +
			b64(5) + "\t0\n",
		"transfer":             b64(2) + "\t1536\t4718592\n" + b64(4) + "\t12\t0\n" + b64(5) + "\t0\t5497558138880\n",
		"persistent-keepalive": b64(2) + "\t25\n" + b64(4) + "\t3661\n" + b64(5) + "\toff\n",
	}
	for _, field := range showfmt.ShowFields {
		if field == "dump" {
			continue
		}
		want, ok := cases[field]
		if !ok {
			t.Errorf("no expectation for %q", field)
			continue
		}
		var b bytes.Buffer
		if err := showfmt.FormatField(&b, "", st, field); err != nil || b.String() != want {
			t.Errorf("%s: got %q, %v\nwant %q", field, b.String(), err, want)
		}
		// `wg show all FIELD` prefixes every line with the interface.
		b.Reset()
		showfmt.FormatField(&b, "wg0", st, field)
		if want := prefixLines("wg0\t", want); b.String() != want {
			t.Errorf("all %s: got %q\nwant %q", field, b.String(), want)
		}
	}
}

func TestFormatFieldEmptyDevice(t *testing.T) {
	want := map[string]string{"public-key": "(none)\n", "private-key": "(none)\n", "listen-port": "0\n",
		"fwmark": "off\n", "peers": "", "endpoints": "", "dump": "(none)\t(none)\t0\toff\n"}
	for field, w := range want {
		var b bytes.Buffer
		if err := showfmt.FormatField(&b, "", device.Status{}, field); err != nil || b.String() != w {
			t.Errorf("%s of an empty device: %q, %v; want %q", field, b.String(), err, w)
		}
	}
}

func TestFormatFieldDumpIsFormatDump(t *testing.T) {
	var a, b bytes.Buffer
	showfmt.FormatField(&a, "wg0", showStatus(), "dump")
	showfmt.FormatDump(&b, "wg0", showStatus())
	if a.String() != b.String() {
		t.Fatalf("dump field %q differs from FormatDump %q", a.String(), b.String())
	}
}

func TestFormatFieldUnknown(t *testing.T) {
	var b bytes.Buffer
	err := showfmt.FormatField(&b, "", showStatus(), "colour")
	if !errors.Is(err, showfmt.ErrUnknownField) || b.Len() != 0 {
		t.Fatalf("unknown field: %v, wrote %q", err, b.String())
	}
}

func prefixLines(prefix, s string) string {
	var out []byte
	start := true
	for i := 0; i < len(s); i++ {
		if start {
			out = append(out, prefix...)
		}
		out = append(out, s[i])
		start = s[i] == '\n'
	}
	return string(out)
}
