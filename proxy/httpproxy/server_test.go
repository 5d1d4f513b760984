package httpproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

func startProxy(t *testing.T, o Options) string {
	t.Helper()
	o.Dial = func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ap.String())
	}
	o.Logf = t.Logf
	s := New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

func TestPlainAndConnect(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Connection") != "" {
			t.Errorf("hop-by-hop header forwarded")
		}
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	defer web.Close()
	px := startProxy(t, Options{Resolve: func(ctx context.Context, h string) (netip.Addr, error) {
		return netip.MustParseAddr("127.0.0.1"), nil
	}})
	pu, _ := url.Parse("http://" + px)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}, Timeout: 10 * time.Second}
	_, port, _ := net.SplitHostPort(web.Listener.Addr().String())
	resp, err := client.Get("http://peer.test:" + port + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello /x" {
		t.Fatalf("plain: %q", b)
	}
	// CONNECT carries any TCP: here, HTTP again.
	c, err := net.Dial("tcp", px)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\nGET /y HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", web.Listener.Addr())
	br := bufio.NewReader(c)
	r1, err := http.ReadResponse(br, nil)
	if err != nil || r1.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", r1, err)
	}
	r2, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(r2.Body)
	if string(b) != "hello /y" {
		t.Fatalf("through CONNECT: %q", b)
	}
}

func TestBadRequests(t *testing.T) {
	px := startProxy(t, Options{})
	for _, req := range []string{
		"GET /not-absolute HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT nohostport HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET https://x/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"\x05\x01\x00garbage\r\n\r\n",
	} {
		c, err := net.Dial("tcp", px)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: %v %v, want 400", req, resp, err)
		}
		c.Close()
	}
}

func TestTooMany(t *testing.T) {
	px := startProxy(t, Options{MaxConns: 1})
	c1, err := net.Dial("tcp", px)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	time.Sleep(100 * time.Millisecond) // let the server take c1's slot
	c2, err := net.Dial("tcp", px)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c2, "GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("%v %v, want 503", resp, err)
	}
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "too many connections") {
		t.Fatalf("body %q", b)
	}
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		method, uri string
		want        Target
		ok          bool
	}{
		{"CONNECT", "example.com:443", Target{"example.com", 443}, true},
		{"CONNECT", "[fd00::1]:22", Target{"fd00::1", 22}, true},
		{"GET", "http://10.0.0.1/x", Target{"10.0.0.1", 80}, true},
		{"GET", "http://[fd00::1]:8080/", Target{"fd00::1", 8080}, true},
		{"CONNECT", "example.com", Target{}, false},
		{"CONNECT", "example.com:0", Target{}, false},
		{"GET", "/x", Target{}, false},
		{"GET", "ftp://x/", Target{}, false},
	} {
		got, err := ParseTarget(tc.method, tc.uri)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s %s: %v %v", tc.method, tc.uri, got, err)
		}
	}
}

func FuzzParseTarget(f *testing.F) {
	f.Add("CONNECT", "example.com:443")
	f.Add("GET", "http://[fd00::1]:8080/x?y")
	f.Add("GET", "http://a:/")
	f.Fuzz(func(t *testing.T, method, uri string) {
		tg, err := ParseTarget(method, uri)
		if err != nil {
			return
		}
		if tg.Host == "" || tg.Port == 0 {
			t.Fatalf("%q %q: empty target %+v", method, uri, tg)
		}
		// The target is a valid authority for CONNECT.
		again, err := ParseTarget("CONNECT", tg.String())
		if err != nil || again != tg {
			t.Fatalf("%+v does not round-trip: %+v %v", tg, again, err)
		}
	})
}
