package engine

import (
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/log"
)

// gvisorLogs routes gVisor's log, which has one process-wide target and
// writes to stderr by default, to the loggers of the open netstack
// engines. Its lines cannot be told apart by stack, so each open engine
// sees all of them. It is package state only because gVisor's target is.
var gvisorLogs = &logRouter{sinks: map[*logSink]bool{}}

type logRouter struct {
	once sync.Once
	// mu guards sinks.
	mu    sync.Mutex
	sinks map[*logSink]bool
}

// logSink is one engine's place in the router.
type logSink struct {
	r    *logRouter
	logf func(string, ...any)
}

func (r *logRouter) add(logf func(string, ...any)) *logSink {
	r.once.Do(func() { log.SetTarget(r) })
	s := &logSink{r: r, logf: logf}
	r.mu.Lock()
	r.sinks[s] = true
	r.mu.Unlock()
	return s
}

func (s *logSink) remove() {
	s.r.mu.Lock()
	delete(s.r.sinks, s)
	s.r.mu.Unlock()
}

// Emit implements log.Emitter.
func (r *logRouter) Emit(_ int, level log.Level, _ time.Time, format string, args ...any) {
	r.mu.Lock()
	sinks := make([]func(string, ...any), 0, len(r.sinks))
	for s := range r.sinks {
		sinks = append(sinks, s.logf)
	}
	r.mu.Unlock()
	for _, f := range sinks {
		f("gvisor: "+level.String()+": "+format, args...)
	}
}
