package tunnel_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/tunnel"
)

// A capture holds the tunnel's inner packets as a pcap file: a UDP
// datagram sent through the tunnel is in it, as an IPv4 packet from the
// client's address to the server's, and so is the reply.
func TestCapture(t *testing.T) {
	sk, ck := newKey(), newKey()
	server := open(t, serverConf(sk, ck), tunnel.Options{Logf: t.Logf})
	pc, err := server.ListenPacket("udp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
	var capture bytes.Buffer
	client, err := tunnel.OpenBytes(context.Background(), clientConf(ck, sk, "", fmt.Sprint("127.0.0.1:", server.Status().ListenPort)), tunnel.Options{Logf: t.Logf, Capture: &capture})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, "udp", serverAddr.String()+":7")
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("captured-payload")
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	got := make([]byte, 100)
	for {
		c.Write(payload)
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, err := c.Read(got)
		if err == nil && bytes.Equal(got[:n], payload) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no echo through the tunnel")
		}
	}
	c.Close()
	client.Close() // flushes the capture
	out, in := 0, 0
	for _, p := range readPcap(t, capture.Bytes()) {
		if len(p) < 20 || p[0]>>4 != 4 || !bytes.Contains(p, payload) {
			continue
		}
		src, dst := netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20]))
		switch {
		case src == clientAddr && dst == serverAddr:
			out++
		case src == serverAddr && dst == clientAddr:
			in++
		}
	}
	if out == 0 || in == 0 {
		t.Fatalf("capture has %d datagrams out and %d back with the payload, want both", out, in)
	}
}

// readPcap parses a classic pcap file of link type RAW and returns its
// packets.
func readPcap(t *testing.T, b []byte) [][]byte {
	t.Helper()
	if len(b) < 24 {
		t.Fatalf("capture of %d bytes has no header", len(b))
	}
	le := binary.LittleEndian
	if m := le.Uint32(b); m != 0xa1b23c4d && m != 0xa1b2c3d4 {
		t.Fatalf("magic %#x", m)
	}
	if lt := le.Uint32(b[20:]); lt != 101 {
		t.Fatalf("link type %d, want RAW (101)", lt)
	}
	var pkts [][]byte
	for r := b[24:]; len(r) > 0; {
		if len(r) < 16 {
			t.Fatalf("truncated record header")
		}
		n := int(le.Uint32(r[8:]))
		if len(r) < 16+n {
			t.Fatalf("record of %d bytes, %d left", n, len(r)-16)
		}
		pkts = append(pkts, r[16:16+n])
		r = r[16+n:]
	}
	return pkts
}
