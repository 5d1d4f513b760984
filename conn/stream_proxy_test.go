package conn_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
)

// connectProxy is a minimal HTTP CONNECT proxy on loopback that records
// the requests it gets and answers each with status (200: then relays).
func connectProxy(t *testing.T, status int) (addr string, reqs func() []*http.Request) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var got []*http.Request
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				mu.Lock()
				got = append(got, req)
				mu.Unlock()
				if status != 200 {
					fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", status, http.StatusText(status))
					return
				}
				up, err := net.Dial("tcp", req.Host)
				if err != nil {
					fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
					return
				}
				defer up.Close()
				fmt.Fprintf(c, "HTTP/1.1 200 Connection established\r\nProxy-Agent: test\r\n\r\n")
				go io.Copy(up, br)
				io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String(), func() []*http.Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]*http.Request(nil), got...)
	}
}

// Through an HTTP CONNECT proxy, with credentials, both plain and TLS
// streams reach the listener, and the proxy saw the endpoint and the
// credentials.
func TestStreamViaProxy(t *testing.T) {
	srv, addr := listenStream(t, conn.StreamOptions{})
	paddr, reqs := connectProxy(t, 200)
	cli := conn.NewStream(conn.StreamOptions{})
	defer cli.Close()
	p, err := conn.ParseProxy("http://user:pa%20ss@" + paddr)
	if err != nil {
		t.Fatal(err)
	}
	cli.SetProxy(p)
	for _, tr := range []conn.Transport{conn.TransportTCP, conn.TransportTLS} {
		if err := cli.Send([][]byte{[]byte(tr.String())}, conn.Endpoint{Dst: addr, Transport: tr}); err != nil {
			t.Fatal(err)
		}
		got, from := recvN(t, srv, 1)
		if string(got[0]) != tr.String() || from[0].Transport != tr {
			t.Fatalf("%q from %+v", got[0], from[0])
		}
	}
	rs := reqs()
	if len(rs) != 2 {
		t.Fatalf("%d CONNECT requests", len(rs))
	}
	for _, r := range rs {
		user, pass, ok := (&http.Request{Header: http.Header{"Authorization": r.Header["Proxy-Authorization"]}}).BasicAuth()
		if r.Method != "CONNECT" || r.Host != addr.String() || !ok || user != "user" || pass != "pa ss" {
			t.Fatalf("request %s %s, credentials %q %q %v", r.Method, r.Host, user, pass, ok)
		}
	}
	if !cli.ViaProxy(conn.Endpoint{Dst: addr, Transport: conn.TransportTLS}) {
		t.Error("ViaProxy false for a connection through the proxy")
	}
	if srv.ViaProxy(conn.Endpoint{Dst: addr, Transport: conn.TransportTLS}) {
		t.Error("ViaProxy true for a connection nobody dialed")
	}
	if st := cli.Stats(); st.ConnsDialed != 2 || st.DialFailures != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A proxy that refuses is a dial failure whose log line says what it
// answered.
func TestStreamProxyRefuses(t *testing.T) {
	paddr, _ := connectProxy(t, 407)
	logs := make(chan string, 4)
	cli := conn.NewStream(conn.StreamOptions{Logf: func(f string, a ...any) { logs <- fmt.Sprintf(f, a...) }})
	defer cli.Close()
	p, _ := conn.ParseProxy("http://" + paddr)
	cli.SetProxy(p)
	dst := conn.Endpoint{Dst: mustAddrPort("127.0.0.1:9"), Transport: conn.TransportTCP}
	cli.Send([][]byte{{1}}, dst)
	select {
	case l := <-logs:
		if !strings.Contains(l, "407") {
			t.Fatalf("log %q does not say 407", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no dial failure logged")
	}
	if st := cli.Stats(); st.DialFailures != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestParseProxy(t *testing.T) {
	for in, want := range map[string]string{
		"http://proxy.example:3128":      "proxy.example:3128",
		"http://10.0.0.1":                "10.0.0.1:80",
		"http://u:p@[2001:db8::1]:8080/": "[2001:db8::1]:8080",
	} {
		p, err := conn.ParseProxy(in)
		if err != nil || p.Host != want {
			t.Errorf("%q: %v %v", in, p, err)
		}
	}
	for _, bad := range []string{"proxy:3128", "https://p:443", "socks5://p:1080", "http://", "http://p:99999",
		"http://p:80/path", "http://p:80?q=1", "http://p:80#f", "http://p:8\n0"} {
		if _, err := conn.ParseProxy(bad); !errors.Is(err, conn.ErrProxy) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
