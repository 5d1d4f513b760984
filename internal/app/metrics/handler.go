package metrics

import (
	"bytes"
	"io"
)

// maxInFlight caps concurrent scrapes: a third one is refused with 503
// rather than queued, so a stuck scraper cannot pile up copies of the
// exposition.
const maxInFlight = 2

// Handler answers requests for /metrics: the collector's series, then the
// Go runtime's and the process's (RSS, CPU, open files).
type Handler struct {
	c     *Collector // nil: runtime and process series only
	proc  procInfo
	slots chan struct{} // a token per scrape in flight
}

// NewHandler returns a handler that scrapes c (which may be nil).
func NewHandler(c *Collector) *Handler {
	return &Handler{c: c, slots: make(chan struct{}, maxInFlight)}
}

// WritePrometheus writes one scrape's exposition, as served on /metrics.
// It does not count against the cap on scrapes in flight.
func (h *Handler) WritePrometheus(w io.Writer) {
	if h.c != nil {
		h.c.WritePrometheus(w)
	}
	e := newExposition()
	runtimeSeries(e)
	h.proc.series(e)
	e.writeTo(w)
}

// reply is a response and its body, which stays valid until release.
type reply struct {
	response
	body    []byte
	release func()
}

var (
	bodyNotFound = []byte("404 page not found\n")
	bodyMethod   = []byte("method not allowed: GET or HEAD /metrics\n")
	bodyBusy     = []byte("too many scrapes at once\n")
)

// serve answers a parsed request. A HEAD gets the head a GET would,
// Content-Length included, and an empty body.
func (h *Handler) serve(req *request) reply {
	r := reply{response: response{status: 200, contentType: textPlain}, release: func() {}}
	switch {
	case req.path != "/metrics":
		r.status, r.body = 404, bodyNotFound
	case req.method != "GET" && req.method != "HEAD":
		r.status, r.body, r.allow = 405, bodyMethod, "GET, HEAD"
	default:
		if !h.acquire() {
			r.status, r.body = 503, bodyBusy
			break
		}
		// A panic while writing (a bug) must not keep the slot: two of
		// them would refuse every scrape after.
		written := false
		defer func() {
			if !written {
				<-h.slots
			}
		}()
		var b bytes.Buffer
		h.WritePrometheus(&b)
		written = true
		r.contentType, r.body = promContent, b.Bytes()
		r.release = func() { <-h.slots }
	}
	r.bodyLen = len(r.body)
	if req.method == "HEAD" {
		r.body = nil
	}
	return r
}

// acquire takes a scrape slot if one is free.
func (h *Handler) acquire() bool {
	select {
	case h.slots <- struct{}{}:
		return true
	default:
		return false
	}
}
