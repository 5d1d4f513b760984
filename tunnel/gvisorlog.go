package tunnel

import (
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/log"
)

// gvisorLogs routes gVisor's log, which has one process-wide target and
// writes to stderr by default, to the open tunnels' loggers. Its lines
// cannot be told apart by stack, so each open tunnel sees all of them.
// It is package state only because gVisor's target is.
var gvisorLogs = &logRouter{sinks: map[*Tunnel]func(string, ...any){}}

type logRouter struct {
	once sync.Once
	// mu guards sinks.
	mu    sync.Mutex
	sinks map[*Tunnel]func(string, ...any)
}

func (r *logRouter) add(t *Tunnel, logf func(string, ...any)) {
	r.once.Do(func() { log.SetTarget(r) })
	r.mu.Lock()
	r.sinks[t] = logf
	r.mu.Unlock()
}

func (r *logRouter) remove(t *Tunnel) {
	r.mu.Lock()
	delete(r.sinks, t)
	r.mu.Unlock()
}

// Emit implements log.Emitter.
func (r *logRouter) Emit(_ int, level log.Level, _ time.Time, format string, args ...any) {
	r.mu.Lock()
	sinks := make([]func(string, ...any), 0, len(r.sinks))
	for _, f := range r.sinks {
		sinks = append(sinks, f)
	}
	r.mu.Unlock()
	for _, f := range sinks {
		f("gvisor: "+level.String()+": "+format, args...)
	}
}
