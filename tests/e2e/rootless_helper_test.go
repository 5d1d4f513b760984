package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/dnstest"
)

// Helper modes of the rootless tests: "services" is the peer's side (HTTP
// with a deterministic blob, TCP and UDP echo on port 7, and a DNS server
// that knows one name); "echo-check" is a client run inside
// `userspace -- CMD`.

// rootlessName is the name the peer's DNS server answers, with its address.
const rootlessName = "peer.tunnel."

// blob writes n bytes of the deterministic stream for seed.
func blob(w io.Writer, seed uint64, n int64) error {
	_, err := io.CopyN(w, rand.NewChaCha8(seed32(seed)), n)
	return err
}

// blobSHA is the SHA-256 of blob(seed, n), in hex.
func blobSHA(seed uint64, n int64) string {
	h := sha256.New()
	blob(h, seed, n)
	return hex.EncodeToString(h.Sum(nil))
}

// services runs the peer's services on s.Addr (an IP) until killed.
func services(s helperSpec, out *printer) (helperResult, error) {
	ip := netip.MustParseAddr(s.Addr)
	web, err := net.Listen("tcp", netip.AddrPortFrom(ip, 80).String())
	if err != nil {
		return helperResult{}, err
	}
	echo, err := net.Listen("tcp", netip.AddrPortFrom(ip, 7).String())
	if err != nil {
		return helperResult{}, err
	}
	uecho, err := net.ListenPacket("udp", netip.AddrPortFrom(ip, 7).String())
	if err != nil {
		return helperResult{}, err
	}
	dns, err := net.ListenPacket("udp", netip.AddrPortFrom(ip, 53).String())
	if err != nil {
		return helperResult{}, err
	}
	go http.Serve(web, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/blob" {
			w.Header().Set("Content-Length", strconv.FormatInt(s.Bytes, 10))
			blob(w, s.Seed, s.Bytes)
			return
		}
		fmt.Fprintf(w, "hello from the peer\n")
	}))
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	go func() {
		b := make([]byte, 65535)
		for {
			n, from, err := uecho.ReadFrom(b)
			if err != nil {
				return
			}
			uecho.WriteTo(b[:n], from)
		}
	}()
	go dnstest.Serve(dns, rootlessName, ip)
	out.line("ready")
	select {}
}

// echoCheck sends s.Bytes through the TCP echo at s.Addr and one datagram
// through the UDP echo there, and checks both came back intact.
func echoCheck(s helperSpec, out *printer) (helperResult, error) {
	c, err := net.DialTimeout("tcp", s.Addr, 10*time.Second)
	if err != nil {
		return helperResult{}, err
	}
	defer c.Close()
	res, err := echoStream(c, s.Seed, s.Bytes)
	if err != nil {
		return res, err
	}
	u, err := net.Dial("udp", s.Addr)
	if err != nil {
		return res, err
	}
	defer u.Close()
	if err := udpRoundTrip(u, []byte("datagram through the namespace")); err != nil {
		return res, err
	}
	res.Datagrams = 1
	return res, nil
}

// echoStream writes n bytes of the seed's stream to c, reads as many back,
// and fails unless they are the same.
func echoStream(c net.Conn, seed uint64, n int64) (helperResult, error) {
	c.SetDeadline(time.Now().Add(3 * time.Minute))
	errc := make(chan error, 1)
	go func() { errc <- blob(c, seed, n) }()
	h := sha256.New()
	got, err := io.CopyN(h, c, n)
	res := helperResult{Bytes: got, SHA256: hex.EncodeToString(h.Sum(nil))}
	if err != nil {
		return res, fmt.Errorf("echo: read %d of %d bytes: %w", got, n, err)
	}
	if err := <-errc; err != nil {
		return res, err
	}
	if want := blobSHA(seed, n); res.SHA256 != want {
		return res, fmt.Errorf("echo: sha256 %s, want %s", res.SHA256, want)
	}
	return res, nil
}

// udpRoundTrip sends msg on a connected socket until the same comes back
// (the first datagrams may be lost to the handshake).
func udpRoundTrip(u net.Conn, msg []byte) error {
	b := make([]byte, 2048)
	for range 10 {
		u.Write(msg)
		u.SetReadDeadline(time.Now().Add(time.Second))
		n, err := u.Read(b)
		if err == nil {
			if !bytes.Equal(b[:n], msg) {
				return fmt.Errorf("udp echo %q, want %q", b[:n], msg)
			}
			return nil
		}
	}
	return fmt.Errorf("no udp echo in 10 tries")
}
