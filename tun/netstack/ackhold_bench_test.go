package netstack

import "testing"

// What the holder's parse costs each TCP packet Write takes while ACKs
// are thinned.
func BenchmarkParseTCP(b *testing.B) {
	p := ackPacket(b, false, 4000, 7, flagACK, []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := parseTCP(p); !ok {
			b.Fatal("not parsed")
		}
	}
}
