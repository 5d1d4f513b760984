package conn

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"testing"
)

// A real ClientHello is recognised; no frame a WireGuard or AmneziaWG peer
// can open a plain stream with is: everything sent before a session (junk,
// signature packets, a padded initiation) is at most 1280 bytes, and a
// stock data message's type byte is 4.
func TestSniffTLS(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go tls.Client(a, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}).Handshake()
	hello := make([]byte, sniffLen)
	if _, err := io.ReadFull(b, hello); err != nil {
		t.Fatal(err)
	}
	if !looksLikeTLS(hello) {
		t.Fatalf("a ClientHello %x not recognised", hello)
	}
	frame := make([]byte, sniffLen)
	for n := 1; n <= 1280; n++ {
		binary.BigEndian.PutUint16(frame, uint16(n))
		for first := range 256 {
			frame[2] = byte(first)
			for _, rest := range []byte{0, 1, 0x16, 0xff} {
				frame[3], frame[4], frame[5] = rest, rest, rest
				if looksLikeTLS(frame) {
					t.Fatalf("frame of %d bytes starting %x taken for TLS", n, frame)
				}
			}
		}
	}
	for n := 32; n <= 65535; n++ {
		binary.BigEndian.PutUint16(frame, uint16(n))
		copy(frame[2:], []byte{4, 0, 0, 0})
		if looksLikeTLS(frame) {
			t.Fatalf("data frame of %d bytes taken for TLS", n)
		}
	}
}
