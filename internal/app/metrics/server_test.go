package metrics_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/app/metrics"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
)

// rawConn is a test's TCP connection to a server, read as HTTP/1.1.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, s *metrics.Server) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (r *rawConn) send(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatal(err)
	}
}

// response reads one response to a request of the given method.
func (r *rawConn) response(method string) (*http.Response, string) {
	r.t.Helper()
	resp, err := http.ReadResponse(r.br, &http.Request{Method: method})
	if err != nil {
		r.t.Fatalf("reading the response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatalf("reading the body: %v", err)
	}
	return resp, string(body)
}

// closed fails the test unless the server closed the connection.
func (r *rawConn) closed() {
	r.t.Helper()
	if n, err := r.br.Read(make([]byte, 1)); err == nil {
		r.t.Fatalf("connection still open: read %d bytes", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		r.t.Fatal("connection still open: read timed out")
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := metrics.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func newServer(t *testing.T, src metrics.Source, timeout time.Duration) *metrics.Server {
	t.Helper()
	ln, err := metrics.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var c *metrics.Collector
	if src != nil {
		c = metrics.NewCollector(src, metrics.Options{Interface: "wg0"})
	}
	s := metrics.ServeForTest(ln, metrics.NewHandler(c), timeout, nil, 0)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestRequestsAnswered: the status and head of each kind of request, each
// on a connection of its own.
func TestRequestsAnswered(t *testing.T) {
	leakcheck.Check(t)
	s := newServer(t, &fakeSource{peers: 1}, 5*time.Second)
	for _, c := range []struct {
		req, method string
		status      int
		close       bool
	}{
		{"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 200, false},
		{"GET /metrics?name[]=go_goroutines HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 200, false},
		{"GET http://x/metrics HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 200, false},
		{"\r\nGET /metrics HTTP/1.1\nHost: x\n\n", "GET", 200, false},
		{"GET /metrics HTTP/1.0\r\n\r\n", "GET", 200, true},
		{"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "HEAD", 200, false},
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 404, false},
		{"GET /metrics/ HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 404, false},
		{"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", "POST", 405, true},
		{"DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "DELETE", 405, false},
		{"GET /metrics HTTP/1.1\r\n\r\n", "GET", 400, true}, // no Host
		{"GET /metrics HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", "GET", 400, true},
		{"GET /metrics HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", "GET", 400, true},
		{"GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n", "GET", 400, true},
		{"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", "GET", 400, true},
		{"GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n", "GET", 505, true},
	} {
		r := dial(t, s)
		r.send(c.req)
		resp, body := r.response(c.method)
		if resp.StatusCode != c.status || resp.Close != c.close {
			t.Errorf("%q: %s, close %v; want %d, close %v", c.req, resp.Status, resp.Close, c.status, c.close)
			continue
		}
		switch {
		case c.status == 200 && c.method == "HEAD":
			if resp.ContentLength <= 0 || body != "" {
				t.Errorf("HEAD: Content-Length %d, body %d bytes", resp.ContentLength, len(body))
			}
		case c.status == 200:
			if !strings.Contains(body, "fipsgo_peers{") || resp.Header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
				t.Errorf("%q: %q\n%s", c.req, resp.Header.Get("Content-Type"), body)
			}
		case c.status == 405:
			if resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("405 without Allow: %v", resp.Header)
			}
		}
		if resp.Header.Get("Date") == "" {
			t.Errorf("%q: no Date", c.req)
		}
		if c.close {
			r.closed()
		}
		r.c.Close() // ends the server's linger after a refusal
	}
}

// TestMalformedRequestLine: garbage is answered 400 and the connection
// closed.
func TestMalformedRequestLine(t *testing.T) {
	leakcheck.Check(t)
	s := newServer(t, nil, 5*time.Second)
	for _, line := range []string{
		"GARBAGE\r\n\r\n",
		"GET /metrics\r\nHost: x\r\n\r\n",
		"GET  /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET metrics HTTP/1.1\r\nHost: x\r\n\r\n",
		"G\x00T /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /met\rrics HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /metrics HTTP/1.1 \r\nHost: x\r\n\r\n",
		"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\n\n", // TLS
	} {
		r := dial(t, s)
		r.send(line)
		if resp, _ := r.response("GET"); resp.StatusCode != 400 {
			t.Errorf("%q: %s, want 400", line, resp.Status)
		}
		r.closed()
	}
}

// TestOversizedHead: a head above 8 KiB is answered 431 and closed, the
// rest of it unread.
func TestOversizedHead(t *testing.T) {
	leakcheck.Check(t)
	s := newServer(t, nil, 5*time.Second)
	r := dial(t, s)
	go io.WriteString(r.c, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 20<<10)+"\r\n\r\n")
	if resp, _ := r.response("GET"); resp.StatusCode != 431 {
		t.Fatalf("%s, want 431", resp.Status)
	}
	r.closed()
	// Just under the cap is fine.
	r = dial(t, s)
	head := "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: \r\n\r\n"
	r.send(strings.Replace(head, "X-Big: ", "X-Big: "+strings.Repeat("a", 8<<10-len(head)), 1))
	if resp, _ := r.response("GET"); resp.StatusCode != 200 {
		t.Fatalf("8 KiB head: %s, want 200", resp.Status)
	}
}

// TestSlowHeadCut: a client that starts a head and never finishes it is
// cut off at the read-header timeout, as is one that sends nothing, and a
// kept-alive connection at the idle timeout.
func TestSlowHeadCut(t *testing.T) {
	leakcheck.Check(t)
	const timeout = 100 * time.Millisecond
	s := newServer(t, nil, timeout)
	for _, c := range []struct{ name, send string }{
		{"partial head", "GET /metrics HTTP/1.1\r\nHost: x\r\n"},
		{"nothing", ""},
		{"empty lines", "\r\n\r\n\r\n"},
	} {
		r := dial(t, s)
		start := time.Now()
		r.send(c.send)
		r.closed()
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: cut after %v", c.name, d)
		}
	}
	r := dial(t, s)
	r.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := r.response("GET"); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("%s, close %v", resp.Status, resp.Close)
	}
	r.closed() // idle past the timeout
}

// TestKeepAlive: requests in turn and pipelined share a connection, which
// closes when the client asks.
func TestKeepAlive(t *testing.T) {
	leakcheck.Check(t)
	s := newServer(t, &fakeSource{}, 5*time.Second)
	r := dial(t, s)
	const get = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
	r.send(get)
	if resp, _ := r.response("GET"); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("first: %s, close %v", resp.Status, resp.Close)
	}
	r.send(get + "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n" + "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	for _, want := range []struct {
		method string
		status int
		close  bool
	}{{"GET", 200, false}, {"GET", 404, false}, {"HEAD", 200, true}} {
		if resp, _ := r.response(want.method); resp.StatusCode != want.status || resp.Close != want.close {
			t.Fatalf("pipelined: %s, close %v; want %d, close %v", resp.Status, resp.Close, want.status, want.close)
		}
	}
	r.closed()
}

// blockingSource holds every Stats call until released.
type blockingSource struct {
	entered chan struct{}
	release chan struct{}
}

func newBlockingSource() *blockingSource {
	return &blockingSource{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (b *blockingSource) Stats(int) device.Stats {
	b.entered <- struct{}{}
	<-b.release
	return device.Stats{Peers: 3}
}

// TestThirdScrapeRefused: with two scrapes in flight a third gets 503,
// and the two complete.
func TestThirdScrapeRefused(t *testing.T) {
	leakcheck.Check(t)
	src := newBlockingSource()
	s := newServer(t, src, 5*time.Second)
	var wg sync.WaitGroup
	statuses := make(chan int, 2)
	for range 2 {
		r := dial(t, s)
		wg.Go(func() {
			r.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, _ := r.response("GET")
			statuses <- resp.StatusCode
		})
	}
	<-src.entered
	<-src.entered
	r := dial(t, s)
	r.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := r.response("GET"); resp.StatusCode != 503 {
		t.Errorf("third scrape: %s, want 503", resp.Status)
	}
	close(src.release)
	wg.Wait()
	for range 2 {
		if st := <-statuses; st != 200 {
			t.Errorf("a scrape in flight got %d", st)
		}
	}
	// A slot freed: the refused client scrapes on the same connection.
	// The server frees a slot once it has written its response, a moment
	// after the client read it, so a 503 or two may still come first.
	status := ""
	for range 200 {
		r.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, _ := r.response("GET")
		if status = resp.Status; resp.StatusCode == 200 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("after the others: %s", status)
}

// TestIdleConnectionsDoNotStarveScrapes: eight kept-alive connections
// that sit between requests (anyone who reaches the endpoint can open
// them) do not keep a scraper out: at the cap the oldest idle one is
// closed and the new connection answered.
func TestIdleConnectionsDoNotStarveScrapes(t *testing.T) {
	leakcheck.Check(t)
	s := newServer(t, &fakeSource{}, 30*time.Second)
	// The idle connections ask for a page that is not there, so that no
	// scrape of theirs is still being released when the ninth's begins
	// (the handler answers two scrapes at once, a third gets 503).
	const get = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
	const nope = "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
	var open []*rawConn
	for range 8 {
		r := dial(t, s)
		r.send(nope)
		if resp, _ := r.response("GET"); resp.StatusCode != 404 || resp.Close {
			t.Fatalf("%s, close %v", resp.Status, resp.Close)
		}
		open = append(open, r)
	}
	for deadline := time.Now().Add(10 * time.Second); s.WaitingForTest() < 8; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections wait for a request, want 8", s.WaitingForTest())
		}
	}
	ninth := dial(t, s) // deadline 10 s: generous, not a timing claim
	ninth.send(get)
	if resp, _ := ninth.response("GET"); resp.StatusCode != 200 {
		t.Fatalf("ninth: %s", resp.Status)
	}
	open[0].closed() // the oldest idle one made room
	for _, r := range open[1:] {
		r.send(nope)
		if resp, _ := r.response("GET"); resp.StatusCode != 404 {
			t.Fatalf("a younger idle connection: %s", resp.Status)
		}
	}
}

// TestCapSparesBusyConnections: at the cap, connections answering a
// request are never the ones closed; the oldest idle one is.
func TestCapSparesBusyConnections(t *testing.T) {
	leakcheck.Check(t)
	src := newBlockingSource()
	s := newServer(t, src, 30*time.Second)
	const get = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
	var wg sync.WaitGroup
	statuses := make(chan int, 2)
	for range 2 { // the oldest two are busy
		r := dial(t, s)
		wg.Go(func() {
			r.send(get)
			resp, _ := r.response("GET")
			statuses <- resp.StatusCode
		})
		<-src.entered
	}
	var idle []*rawConn
	for range 6 {
		idle = append(idle, dial(t, s)) // accepted, no request yet
	}
	// The eighth slot is taken once the sixth idle one is accepted; a
	// request answered on it shows it was.
	idle[5].send("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := idle[5].response("GET"); resp.StatusCode != 404 {
		t.Fatalf("sixth idle: %s", resp.Status)
	}
	ninth := dial(t, s)
	ninth.send("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := ninth.response("GET"); resp.StatusCode != 404 {
		t.Fatalf("ninth: %s", resp.Status)
	}
	idle[0].closed()
	close(src.release)
	wg.Wait()
	for range 2 {
		if st := <-statuses; st != 200 {
			t.Errorf("a busy connection got %d", st)
		}
	}
}

// TestConnectionCapWhenAllBusy: with every slot answering a request, a
// further connection waits, unanswered, until one is free.
func TestConnectionCapWhenAllBusy(t *testing.T) {
	leakcheck.Check(t)
	src := newBlockingSource()
	s := metrics.ServeForTest(listen(t), metrics.NewHandler(metrics.NewCollector(src, metrics.Options{Interface: "wg0"})), 30*time.Second, nil, 2)
	t.Cleanup(func() { s.Close() })
	const get = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
	var wg sync.WaitGroup
	for range 2 {
		r := dial(t, s)
		wg.Go(func() {
			r.send(get)
			if resp, _ := r.response("GET"); resp.StatusCode != 200 {
				t.Errorf("busy: %s", resp.Status)
			}
		})
		<-src.entered
	}
	third := dial(t, s)
	third.send(get)
	third.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := third.br.ReadByte(); err == nil {
		t.Fatal("a connection beyond the cap was answered while every slot was busy")
	}
	close(src.release)
	wg.Wait()
	third.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, _ := third.response("GET"); resp.StatusCode != 200 {
		t.Fatalf("after the busy ones: %s", resp.Status)
	}
}

// TestCloseWaitsForScrape: Close closes idle connections at once, lets a
// scrape in progress finish (with Connection: close), and returns after.
func TestCloseWaitsForScrape(t *testing.T) {
	leakcheck.Check(t)
	src := newBlockingSource()
	s := newServer(t, src, 5*time.Second)
	idle := dial(t, s)
	busy := dial(t, s)
	busy.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	<-src.entered
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	idle.closed()
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v during a scrape", err)
	default:
	}
	close(src.release)
	resp, body := busy.response("GET")
	if resp.StatusCode != 200 || !resp.Close || !strings.Contains(body, "fipsgo_peers{") {
		t.Errorf("scrape across Close: %s, close %v", resp.Status, resp.Close)
	}
	busy.closed()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Error("accepting after Close")
	}
}

// TestCloseCutsStuckScrape: a scrape still running after the grace period
// has its connection closed; Close returns once the Source does.
func TestCloseCutsStuckScrape(t *testing.T) {
	leakcheck.Check(t)
	src := newBlockingSource()
	s := newServer(t, src, 50*time.Millisecond)
	busy := dial(t, s)
	busy.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	<-src.entered
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	busy.closed() // after the grace
	close(src.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// panickingSource panics on its first n Stats calls, as a bug would.
type panickingSource struct {
	mu sync.Mutex
	n  int
}

func (p *panickingSource) Stats(int) device.Stats {
	p.mu.Lock()
	left := p.n
	p.n--
	p.mu.Unlock()
	if left > 0 {
		panic("a bug in a Stats")
	}
	return device.Stats{}
}

// TestPanicCostsItsConnectionOnly: net/http recovered a handler's panic,
// and the daemon depends on that: a bug in a scrape must close that
// connection, be logged, and leave the server (its scrape slots too)
// serving the next one.
func TestPanicCostsItsConnectionOnly(t *testing.T) {
	leakcheck.Check(t)
	ln, err := metrics.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs []string
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, format)
	}
	c := metrics.NewCollector(&panickingSource{n: 3}, metrics.Options{Interface: "wg0"})
	s := metrics.ServeForTest(ln, metrics.NewHandler(c), 5*time.Second, logf, 0)
	t.Cleanup(func() { s.Close() })
	// More panics than there are scrape slots: a slot kept by a panic
	// would refuse the last scrape with 503.
	for range 3 {
		r := dial(t, s)
		r.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
		r.closed()
	}
	r := dial(t, s)
	r.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := r.response("GET"); resp.StatusCode != 200 {
		t.Fatalf("after the panics: %s", resp.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 3 || !strings.Contains(logs[0], "panic") {
		t.Fatalf("logged %q, want one panic line per panic", logs)
	}
}
