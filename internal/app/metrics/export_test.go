package metrics

import (
	"net"
	"time"
)

// ServeForTest is Serve with every timeout, and Close's grace, set to d,
// and at most maxConns connections (0: the default).
func ServeForTest(ln net.Listener, h *Handler, d time.Duration, logf func(string, ...any), maxConns int) *Server {
	cfg := defaultServerConfig()
	if maxConns > 0 {
		cfg.maxConns = maxConns
	}
	cfg.readHeaderTimeout, cfg.writeTimeout, cfg.idleTimeout, cfg.closeGrace, cfg.linger = d, d, d, d, d
	return serve(ln, h, cfg, logf)
}

// WaitingForTest counts the connections waiting for a request: a client
// may see its response before the server has marked its connection so.
func (s *Server) WaitingForTest() int { return s.slots.NumIdle() }
