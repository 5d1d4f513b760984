package tun

// linkLook is what one look at the interface found while it lived in
// another namespace.
type linkLook struct {
	ns      nsID
	mtu     int
	running bool
}

// linkTracker decides which events the interface's changes call for, the
// way wireguard-go reports them: EventUp whenever it is seen running,
// EventDown only once it has been up, EventMTUUpdate when the MTU may have
// changed. It does no I/O, so both the event listener and the poller feed
// it what they saw, and it is tested on its own.
type linkTracker struct {
	last  linkLook
	seen  bool // last holds a look; else the next look is reported in full
	wasUp bool // running at some point, so not running is worth an EventDown
}

// observe returns the events for look l given the one before it. A look
// that follows no other (following just began, or resumed after the
// interface left our namespace) is reported in full, since whatever
// changed meanwhile went unheard.
func (t *linkTracker) observe(l linkLook) []Event {
	var evs []Event
	if !t.seen || l.running != t.last.running {
		evs = t.runningNow(l.running, evs)
	}
	// A new namespace is reported too: the MTU was asked of a different
	// interface table, and a consumer caching anything by namespace
	// should ask again.
	if !t.seen || l.mtu != t.last.mtu || l.ns != t.last.ns {
		evs = append(evs, EventMTUUpdate)
	}
	t.last, t.seen = l, true
	return evs
}

// forget makes the next look be reported in full: the caller stopped
// looking for a while.
func (t *linkTracker) forget() { t.seen = false }

// runningNow appends the up or down event for a running state heard of
// (a link message or a look) to evs.
func (t *linkTracker) runningNow(running bool, evs []Event) []Event {
	if running {
		t.wasUp = true
		return append(evs, EventUp)
	}
	if t.wasUp {
		return append(evs, EventDown)
	}
	return evs
}
