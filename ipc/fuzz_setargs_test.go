package ipc_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/ipc"
)

// FuzzParseSetArgs feeds `fips-go set` arguments (split on spaces) to the
// parser: nothing may panic, and what it accepts WriteSet can encode and
// ParseSet can read back.
func FuzzParseSetArgs(f *testing.F) {
	f.Add("wg0 listen-port 51820 fwmark 0x10 private-key priv peer " + b64(2) +
		" preshared-key psk endpoint test.wireguard.com:1 persistent-keepalive 25 allowed-ips 10.0.0.1/8,fd00::/64")
	f.Add("wg0 peer " + b64(3) + " remove peer " + b64(4) + " allowed-ips +10.9.0.0/16,-10.8.0.0/16 persistent-keepalive off")
	f.Add("wg0 fwmark off peer " + b64(5) + " endpoint [fe80::1%eth0]:9 allowed-ips ::/0")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, " ")
		cfg, err := ipc.ParseSetArgs(args[1:], fakeResolve, fakeFiles)
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := ipc.WriteSet(&b, cfg); err != nil {
			t.Fatalf("WriteSet refused what ParseSetArgs returned: %v", err)
		}
		if _, err := ipc.ParseSet(&b, 0); err != nil {
			t.Fatalf("ParseSet(WriteSet(ParseSetArgs(x))): %v\n%s", err, b.String())
		}
	})
}
