package tunnel_test

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"

	"github.com/fips-go/fips-go/tunnel"
	"golang.org/x/net/dns/dnsmessage"
)

// Two tunnels in one process, each the other's peer over loopback UDP: the
// server serves HTTP and a name for it; the client waits for the
// handshake and GETs the page by name through the tunnel's DNS.
func Example() {
	ctx := context.Background()
	serverKey, clientKey := newKey(), newKey()

	server, err := tunnel.OpenBytes(ctx, []byte(`
[Interface]
PrivateKey = `+serverKey.private+`
Address = 10.99.0.1/24

[Peer]
PublicKey = `+clientKey.public+`
AllowedIPs = 10.99.0.2/32
`), tunnel.Options{})
	if err != nil {
		panic(err)
	}
	defer server.Close()
	go serveName(server, "web.internal.", netip.MustParseAddr("10.99.0.1"))
	ln, err := server.Listen("tcp", "10.99.0.1:80")
	if err != nil {
		panic(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	}))

	client, err := tunnel.OpenBytes(ctx, []byte(fmt.Sprintf(`
[Interface]
PrivateKey = %s
Address = 10.99.0.2/24
DNS = 10.99.0.1

[Peer]
PublicKey = %s
AllowedIPs = 10.99.0.0/24
Endpoint = 127.0.0.1:%d
`, clientKey.private, serverKey.public, server.Status().ListenPort)), tunnel.Options{})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	if err := client.WaitHandshake(ctx); err != nil {
		panic(err)
	}
	resp, err := client.HTTPClient().Get("http://web.internal/")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output: hello from web.internal
}

type keyPair struct{ private, public string }

func newKey() keyPair {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	enc := base64.StdEncoding.EncodeToString
	return keyPair{enc(k.Bytes()), enc(k.PublicKey().Bytes())}
}

// serveName is a tiny DNS server inside the tunnel, on port 53 of addr:
// it answers A queries for name with addr and every other question with
// no records, until the tunnel closes.
func serveName(t *tunnel.Tunnel, name string, addr netip.Addr) error {
	pc, err := t.ListenPacket("udp", netip.AddrPortFrom(addr, 53).String())
	if err != nil {
		return err
	}
	defer pc.Close()
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		if reply, ok := answer(buf[:n], name, addr); ok {
			pc.WriteTo(reply, from)
		}
	}
}

func answer(query []byte, name string, addr netip.Addr) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
	b.EnableCompression()
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	if q.Type == dnsmessage.TypeA && strings.EqualFold(q.Name.String(), name) {
		b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60},
			dnsmessage.AResource{A: addr.As4()})
	}
	reply, err := b.Finish()
	return reply, err == nil
}
