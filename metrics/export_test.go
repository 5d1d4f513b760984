package metrics

import (
	"net"
	"time"
)

// ServeForTest is Serve with every timeout, and Close's grace, set to d.
func ServeForTest(ln net.Listener, h *Handler, d time.Duration, logf func(string, ...any)) *Server {
	cfg := defaultServerConfig()
	cfg.readHeaderTimeout, cfg.writeTimeout, cfg.idleTimeout, cfg.closeGrace, cfg.linger = d, d, d, d, d
	return serve(ln, h, cfg, logf)
}
