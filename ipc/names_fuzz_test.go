package ipc

import (
	"bufio"
	"strings"
	"testing"
)

// FuzzParseNames: any set=fipsnames body gets an answer, never a panic,
// and an accepted one holds only valid names.
func FuzzParseNames(f *testing.F) {
	key := strings.Repeat("ab", 32)
	f.Add("public_key=" + key + "\nendpoint_name=vpn.example:51820\n\n")
	f.Add("replace=true\npublic_key=" + key + "\nendpoint_name=\n\n")
	f.Add("public_key=" + key + "\nendpoint_name=[::1]:1\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		names, _, _, err := parseNames(bufio.NewReader(strings.NewReader(body)), 1<<16)
		if err != nil {
			return
		}
		for _, n := range names {
			if n != "" && ValidEndpointName(n) != nil {
				t.Fatalf("accepted invalid name %q", n)
			}
		}
	})
}
