package main

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/tunnel"
	"golang.org/x/net/dns/dnsmessage"
)

var webAddr = netip.MustParseAddr("10.88.0.1")

// The README's program, run as it is against a real peer: a second tunnel
// in this process (built with public packages only) serves HTTP and the
// name web.internal inside the tunnel; main reads the wg0.conf written
// for it in its working directory and must print the page.
func TestREADMEProgram(t *testing.T) {
	serverKey, clientKey := newKey(t), newKey(t)
	server, err := tunnel.OpenBytes(context.Background(), fmt.Appendf(nil, `
[Interface]
PrivateKey = %s
Address = %v/24

[Peer]
PublicKey = %s
AllowedIPs = 10.88.0.2/32
`, serverKey.private, webAddr, clientKey.public), tunnel.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	dns, err := server.ListenPacket("udp", netip.AddrPortFrom(webAddr, 53).String())
	if err != nil {
		t.Fatal(err)
	}
	go serveName(dns, "web.internal.", webAddr)
	ln, err := server.Listen("tcp", netip.AddrPortFrom(webAddr, 80).String())
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s through the tunnel\n", r.Host)
	}))

	dir := t.TempDir()
	conf := fmt.Sprintf(`[Interface]
PrivateKey = %s
Address = 10.88.0.2/24
DNS = %v

[Peer]
PublicKey = %s
AllowedIPs = 10.88.0.0/24
Endpoint = 127.0.0.1:%d
`, clientKey.private, webAddr, serverKey.public, server.Status().ListenPort)
	if err := os.WriteFile(filepath.Join(dir, "wg0.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)

	out := captureStdout(t, main)
	if want := "hello from web.internal through the tunnel\n"; out != want {
		t.Fatalf("the program printed %q, want %q", out, want)
	}
}

// captureStdout runs f with os.Stdout going to a pipe and returns what it
// wrote.
func captureStdout(t *testing.T, f func()) string {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	stdout := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = stdout }()
	f()
	w.Close()
	return string(<-got)
}

// The program in the README's "Go library" section and in the tunnel
// package's documentation is this module's main.go, byte for byte.
func TestREADMEShowsThisProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, prog, ok := bytes.Cut(src, []byte("\npackage main\n"))
	if !ok {
		t.Fatal("main.go: no package clause")
	}
	want := "package main\n" + string(prog)

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n## Go library\n")
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(section)
	if m == nil || m[1] != want {
		t.Errorf("README's Go library program differs from main.go:\n%s", m)
	}

	doc, err := os.ReadFile("../../tunnel/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	// The program is the code block of the section "A complete program".
	_, section, _ = strings.Cut(string(doc), "// # A complete program\n")
	section, _, _ = strings.Cut(section, "\n// #")
	var inDoc strings.Builder
	for line := range strings.Lines(section) {
		switch {
		case strings.HasPrefix(line, "//\t"):
			inDoc.WriteString(line[3:])
		case line == "//\n" && inDoc.Len() > 0:
			inDoc.WriteString("\n")
		}
	}
	if got := strings.TrimSpace(inDoc.String()); got != strings.TrimSpace(want) {
		t.Errorf("tunnel/doc.go's program differs from main.go:\n%s", got)
	}
	if n := codeLines(want); n > 20 {
		t.Errorf("the program has %d lines of code (imports and error checks aside), want at most 20", n)
	}
}

// codeLines counts the lines of the program that are neither the package
// clause, imports, blank, nor an error check (`if err != nil {`, its body
// and closing brace).
func codeLines(prog string) int {
	n, inImport, inCheck := 0, false, false
	for line := range strings.Lines(prog) {
		l := strings.TrimSpace(line)
		switch {
		case inImport:
			inImport = l != ")"
		case inCheck:
			inCheck = l != "}"
		case l == "import (":
			inImport = true
		case strings.HasPrefix(l, "if ") && strings.HasSuffix(l, "err != nil {"):
			// if err := f(); err != nil {: the call is code, the check not.
			if strings.Contains(l, ";") {
				n++
			}
			inCheck = true
		case l == "", strings.HasPrefix(l, "package "):
		default:
			n++
		}
	}
	return n
}

type keyPair struct{ private, public string }

func newKey(t *testing.T) keyPair {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.StdEncoding.EncodeToString
	return keyPair{enc(k.Bytes()), enc(k.PublicKey().Bytes())}
}

// serveName answers DNS queries arriving on pc: A queries for name with
// addr, every other question with no records, until pc closes.
func serveName(pc net.PacketConn, name string, addr netip.Addr) {
	defer pc.Close()
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if reply, err := answer(buf[:n], name, addr); err == nil {
			pc.WriteTo(reply, from)
		}
	}
}

func answer(query []byte, name string, addr netip.Addr) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	if q.Type == dnsmessage.TypeA && strings.EqualFold(q.Name.String(), name) {
		b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60},
			dnsmessage.AResource{A: addr.As4()})
	}
	return b.Finish()
}
