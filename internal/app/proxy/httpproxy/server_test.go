package httpproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/app/http1"

	"github.com/fips-go/fips-go/internal/app/proxy/proxytest"
)

// startProxy serves o on loopback, its tunnel the loopback itself unless
// o has a Dial, logging to t unless o has a Logf.
func startProxy(t *testing.T, o Options) string {
	t.Helper()
	if o.Dial == nil {
		o.Dial = func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ap.String())
		}
	}
	if o.Logf == nil {
		o.Logf = t.Logf
	}
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
	entered, release := make(chan struct{}, 1), make(chan struct{})
	web := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	defer web.Close()
	defer close(release)
	px := startProxy(t, Options{MaxConns: 1})
	c1, err := net.Dial("tcp", px)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	// c1 is busy: its request is being forwarded. (An idle one would be
	// closed to make room; TestIdleKeepAliveDoesNotHoldSlots.)
	fmt.Fprintf(c1, "GET %s/ HTTP/1.1\r\nHost: x\r\n\r\n", web.URL)
	<-entered
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

// proxyClient is an http.Client that goes through the proxy at px.
func proxyClient(px string) *http.Client {
	pu, _ := url.Parse("http://" + px)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}, Timeout: 10 * time.Second}
}

// echoServer answers with the request body and how it was framed.
func echoServer(t *testing.T) *httptest.Server {
	t.Helper()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Framing", fmt.Sprintf("%d %q", r.ContentLength, r.TransferEncoding))
		io.Copy(w, r.Body)
	}))
	t.Cleanup(web.Close)
	return web
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

func TestPostBodies(t *testing.T) {
	web := echoServer(t)
	c := proxyClient(startProxy(t, Options{}))
	body := randomBytes(300 << 10)
	for _, tc := range []struct {
		name    string
		body    io.Reader
		framing string
	}{
		{"content-length", bytes.NewReader(body), fmt.Sprintf("%d []", len(body))},
		// A reader of unknown length makes the client send chunks.
		{"chunked", io.MultiReader(bytes.NewReader(body[:1000]), bytes.NewReader(body[1000:])), `-1 ["chunked"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Post(web.URL+"/echo", "application/octet-stream", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("echo: %d bytes, %v; want %d bytes", len(got), err, len(body))
			}
			if f := resp.Header.Get("X-Framing"); f != tc.framing {
				t.Errorf("upstream saw framing %s, want %s", f, tc.framing)
			}
		})
	}
}

func TestExpectContinue(t *testing.T) {
	web := echoServer(t)
	c := proxyClient(startProxy(t, Options{}))
	req, _ := http.NewRequest("PUT", web.URL, strings.NewReader("after the 100"))
	req.Header.Set("Expect", "100-continue")
	c.Transport.(*http.Transport).ExpectContinueTimeout = 5 * time.Second
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "after the 100" {
		t.Fatalf("body %q", b)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("took %v: the client waited out its Expect timeout", d)
	}
}

func TestChunkedResponse(t *testing.T) {
	want := randomBytes(100 << 10)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for b := want; len(b) > 0; {
			n := min(len(b), 7000)
			w.Write(b[:n])
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	}))
	defer web.Close()
	px := startProxy(t, Options{})
	resp, err := proxyClient(px).Get(web.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%d bytes, %v; want %d", len(got), err, len(want))
	}
	if len(resp.TransferEncoding) != 1 || resp.Close {
		t.Errorf("chunked response: encoding %q close %v", resp.TransferEncoding, resp.Close)
	}
	// An HTTP/1.0 client gets the body read until close.
	c := dialProxy(t, px)
	fmt.Fprintf(c, "GET %s/ HTTP/1.0\r\n\r\n", web.URL)
	got, err = io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(got), "\r\n\r\n")
	if !ok || body != string(want) || strings.Contains(string(got), "chunked") {
		t.Errorf("HTTP/1.0: %d bytes of body, head %.200q", len(body), got)
	}
}

// rawServer answers each connection with reply, then closes it.
func rawServer(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, reply)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestResponseUntilClose(t *testing.T) {
	body := string(randomBytes(200 << 10))
	up := rawServer(t, "HTTP/1.0 200 OK\r\nContent-Type: x/y\r\n\r\n"+body)
	px := startProxy(t, Options{})
	resp, err := proxyClient(px).Get("http://" + up + "/")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(got) != body || !resp.Close || resp.Header.Get("Content-Type") != "x/y" {
		t.Fatalf("%d bytes, %v, close %v, header %v", len(got), err, resp.Close, resp.Header)
	}
}

func TestTruncatedResponses(t *testing.T) {
	px := startProxy(t, Options{})
	for _, reply := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly some",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly some",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nsome\r\n",
	} {
		up := rawServer(t, reply)
		resp, err := proxyClient(px).Get("http://" + up + "/")
		if err != nil {
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Errorf("%q: body %q taken for whole", reply, b)
		}
	}
}

func TestBadUpstream(t *testing.T) {
	px := startProxy(t, Options{})
	for _, reply := range []string{
		"garbage\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\n\r\n",
		"",
	} {
		up := rawServer(t, reply)
		resp, err := proxyClient(px).Get("http://" + up + "/")
		if err != nil || resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%q: %v %v, want 502", reply, resp, err)
			continue
		}
		resp.Body.Close()
	}
	// Nothing listens on port 1.
	resp, err := proxyClient(px).Get("http://127.0.0.1:1/")
	if err != nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("dial failure: %v %v, want 502", resp, err)
	}
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "127.0.0.1:1") {
		t.Errorf("502 body %q", b)
	}
}

func TestHopByHopRemoved(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, k := range []string{"X-Named", "Keep-Alive", "Proxy-Authorization", "Te", "Upgrade", "Proxy-Connection"} {
			if v := r.Header.Get(k); v != "" {
				t.Errorf("request field %s: %q forwarded", k, v)
			}
		}
		if r.Header.Get("X-Kept") != "yes" || r.Host == "wrong" {
			t.Errorf("end-to-end field lost or Host kept: %v %q", r.Header, r.Host)
		}
		if r.RequestURI != "/p/a%20th?q=1" {
			t.Errorf("request-target %q", r.RequestURI)
		}
	}))
	defer web.Close()
	px := startProxy(t, Options{})
	c := dialProxy(t, px)
	fmt.Fprintf(c, "GET %s/p/a%%20th?q=1#frag HTTP/1.1\r\nHost: wrong\r\nConnection: X-Named\r\nX-Named: 1\r\n"+
		"Keep-Alive: 1\r\nProxy-Authorization: Basic eA==\r\nTE: trailers\r\nUpgrade: x\r\nProxy-Connection: keep-alive\r\nX-Kept: yes\r\n\r\n", web.URL)
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	up := rawServer(t, "HTTP/1.1 200 OK\r\nConnection: X-Resp-Named\r\nX-Resp-Named: 1\r\nKeep-Alive: timeout=5\r\n"+
		"X-Resp-Kept: yes\r\nContent-Length: 0\r\n\r\n")
	resp, err := proxyClient(px).Get("http://" + up + "/")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("X-Resp-Named") != "" || resp.Header.Get("Keep-Alive") != "" || resp.Header.Get("X-Resp-Kept") != "yes" {
		t.Errorf("response header %v", resp.Header)
	}
}

func TestKeepAlive(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
	}))
	defer web.Close()
	c := dialProxy(t, startProxy(t, Options{}))
	// Pipelined: the second request is sent before the first answer.
	fmt.Fprintf(c, "POST %[1]s/a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"+
		"POST %[1]s/b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n1;ext=1\r\nf\r\n0\r\nTrailer-Field: x\r\n\r\n"+
		"HEAD %[1]s/c HTTP/1.1\r\nHost: x\r\n\r\n", web.URL)
	br := bufio.NewReader(c)
	for _, want := range []string{"POST /a abc", "POST /b def", ""} {
		method := "GET"
		if want == "" {
			method = "HEAD"
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("want %q: %v", want, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || string(b) != want || resp.Close {
			t.Fatalf("%q %v close %v, want %q", b, err, resp.Close, want)
		}
	}
	// Connection: close is honoured.
	fmt.Fprintf(c, "GET %s/d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", web.URL)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || !resp.Close {
		t.Fatalf("%v %v", resp, err)
	}
	io.ReadAll(resp.Body)
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("connection left open: %d %v", n, err)
	}
}

func TestHeaderTooLarge(t *testing.T) {
	c := dialProxy(t, startProxy(t, Options{}))
	fmt.Fprintf(c, "GET http://x/ HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 70<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !resp.Close {
		t.Fatalf("%v %v, want 431 and close", resp, err)
	}
}

func TestMalformedRequests(t *testing.T) {
	px := startProxy(t, Options{})
	up := rawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	for req, want := range map[string]int{
		"GET http://x/ HTTP/1.1 x\r\nHost: x\r\n\r\n": 400,
		"GET\r\n\r\n":                                                                                   400,
		"GET  http://x/ HTTP/1.1\r\n\r\n":                                                               400,
		"GET http://x/ HTTP/2.0\r\nHost: x\r\n\r\n":                                                     505,
		"GET http://x/ HTTP/1.1\r\n\r\n":                                                                400, // no Host
		"GET http:///x HTTP/1.1\r\nHost: x\r\n\r\n":                                                     400,
		"GET http://x/ HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n":                                          400,
		"GET http://x/ HTTP/1.1\r\nHost : x\r\n\r\n":                                                    400,
		"GET http://x/ HTTP/1.1\r\nHost: x\r\nBad\x00: 1\r\n\r\n":                                       400,
		"GET http://x/ HTTP/1.1\r\nHost: x\rX: y\r\n\r\n":                                               400,
		"POST http://x/ HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n":                              400,
		"POST http://x/ HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 2\r\n\r\n":                            400,
		"POST http://x/ HTTP/1.1\r\nHost: x\r\nContent-Length: 0x10\r\n\r\n":                            400,
		"POST http://x/ HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n": 400,
		"POST http://" + up + "/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n":       400,
		"GET http://x/ HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("A: b\r\n", http1.MaxFields) + "\r\n":  431,
		"POST http://x/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n":                                 400,
		"POST http://x/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n":                         501,
	} {
		c := dialProxy(t, px)
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != want || !resp.Close || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("%q: %v %v, want %d", req, resp, err, want)
		}
	}
}

func dialProxy(t *testing.T, px string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", px)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCancelEndsTunnels(t *testing.T) {
	// An echo server at the far end of the tunnel.
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	before := runtime.NumGoroutine()
	s := New(Options{Dial: func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ap.String())
	}, Logf: t.Logf})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()

	tun := dialProxy(t, ln.Addr().String())
	fmt.Fprintf(tun, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\nping", echo.Addr())
	br := bufio.NewReader(tun)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(br, b); err != nil || string(b) != "ping" {
		t.Fatalf("through the tunnel: %q %v", b, err)
	}
	// A client idle in a keep-alive wait and one mid-head end too.
	idle := dialProxy(t, ln.Addr().String())
	io.WriteString(idle, "GET http://x")
	time.Sleep(50 * time.Millisecond)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if _, err := br.ReadByte(); err == nil {
		t.Error("tunnel still open")
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("listener still open")
	}
	// Serve waited for its handlers: only the echo server's remain.
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines, %d before", n, before)
	}
}

// failingListener passes on one connection, then fails once fail is closed.
type failingListener struct {
	net.Listener
	accepted bool
	fail     chan struct{}
}

func (l *failingListener) Accept() (net.Conn, error) {
	if !l.accepted {
		l.accepted = true
		return l.Listener.Accept()
	}
	<-l.fail
	return nil, errors.New("listener broke")
}

func TestListenerFailureEndsConnections(t *testing.T) {
	web := echoServer(t)
	s := New(Options{Dial: func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ap.String())
	}, Logf: t.Logf})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &failingListener{Listener: inner, fail: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), ln) }()
	c := dialProxy(t, inner.Addr().String())
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", web.Listener.Addr())
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	close(ln.fail)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "listener broke") {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return: the tunnel kept it waiting")
	}
	if _, err := br.ReadByte(); err == nil {
		t.Error("tunnel still open")
	}
}

// TestPanicCostsItsConnectionOnly: net/http recovered a handler's panic,
// and the rootless modes depend on that: a bug while serving one client
// closes that client's connection, is logged, and the proxy serves on.
func TestPanicCostsItsConnectionOnly(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "fine")
	}))
	defer web.Close()
	var log proxytest.Log
	px := startProxy(t, Options{Dial: proxytest.PanicOnceDial(), Logf: log.Logf})

	get := func() (string, error) {
		c, err := net.Dial("tcp", px)
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", web.Listener.Addr(), web.Listener.Addr())
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get(); err == nil {
		t.Fatalf("the request whose dial panicked was answered: %q", body)
	}
	if body, err := get(); err != nil || body != "fine" {
		t.Fatalf("after the panic: %q, %v", body, err)
	}
	if n := log.Count("panic serving"); n != 1 {
		t.Fatalf("%d panic lines logged, want 1", n)
	}
}

// TestIdleKeepAliveDoesNotHoldSlots: connections between requests do not
// keep a client out at the cap: the one idle longest is closed and the new
// client served.
func TestIdleKeepAliveDoesNotHoldSlots(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	defer web.Close()
	px := startProxy(t, Options{MaxConns: 2})
	get := func(c net.Conn, br *bufio.Reader) int {
		t.Helper()
		fmt.Fprintf(c, "GET %s/ HTTP/1.1\r\nHost: x\r\n\r\n", web.URL)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		return resp.StatusCode
	}
	var idle []net.Conn
	for range 2 {
		c := dialProxy(t, px)
		if st := get(c, bufio.NewReader(c)); st != 200 {
			t.Fatalf("keep-alive request: %d", st)
		}
		idle = append(idle, c)
	}
	c := dialProxy(t, px)
	if st := get(c, bufio.NewReader(c)); st != 200 {
		t.Fatalf("beside two idle keep-alive connections: %d, want 200", st)
	}
	idle[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the oldest idle connection: %v, want it closed", err)
	}
}
