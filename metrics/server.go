package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"golang.org/x/net/netutil"
)

// Caps on the HTTP side: a scraper needs one connection; a few more let
// curl in beside it. Anything beyond waits in the kernel's backlog, and a
// third concurrent scrape is refused rather than queued.
const (
	maxConns    = 8
	maxInFlight = 2
)

// metadataOnce turns on the library's HELP and TYPE lines; it is a
// process-wide switch there, and every fips-go exposition wants them.
var metadataOnce sync.Once

// Handler serves c's metrics, then the Go runtime's and the process's
// (RSS, CPU, open files), on /metrics.
func Handler(c *Collector) http.Handler {
	metadataOnce.Do(func() { vm.ExposeMetadata(true) })
	sem := make(chan struct{}, maxInFlight)
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		default:
			http.Error(w, "too many scrapes at once", http.StatusServiceUnavailable)
			return
		}
		var b bytes.Buffer
		c.WritePrometheus(&b)
		vm.WriteProcessMetrics(&b)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(b.Bytes())
	})
	return mux
}

// ListenAddress completes a --metrics address: a bare port (":9586" or
// "9586") means loopback, so the endpoint is never public by accident; a
// named host, including 0.0.0.0, is taken as given.
func ListenAddress(addr string) (string, error) {
	if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: want [HOST]:PORT, e.g. 127.0.0.1:9586", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("metrics address %q: bad port", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// ListenTCP binds addr after ListenAddress completed it.
func ListenTCP(addr string) (*net.TCPListener, error) {
	addr, err := ListenAddress(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return ln.(*net.TCPListener), nil
}

// Server is a running metrics endpoint.
type Server struct {
	ln  net.Listener
	srv *http.Server
	err chan error
}

// Serve serves h on ln (at most maxConns connections at once) until Close.
func Serve(ln net.Listener, h http.Handler) *Server {
	s := &Server{
		ln: ln,
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			WriteTimeout:      15 * time.Second,
			IdleTimeout:       time.Minute,
			MaxHeaderBytes:    8 << 10,
		},
		err: make(chan error, 1),
	}
	go func() { s.err <- s.srv.Serve(netutil.LimitListener(ln, maxConns)) }()
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server, waiting up to a second for scrapes in progress.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.err; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
