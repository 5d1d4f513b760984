//go:build linux

package storm

import (
	"testing"
)

// TestStorm: 2,000 configured peers, 500 of them handshake within half a
// second, and each sends one echo request through the tunnel and gets the
// gateway's reply back, authenticated. It checks completeness, not time:
// the 60 s run limit only guards against a hang.
func TestStorm(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	peersim := build(t, dir, "peersim", "./tests/peersim")
	im := fipsGo(t, dir)
	const configured, storm = 2000, 500
	b := newTestbed(t, im, peersim, configured, 1)
	r, _ := b.runSim(storm, nil, "-storm", "500ms", "-rate", "1", "-pings", "1", "-until-done", "-duration", "60s")
	t.Logf("%+v", r)
	if r.Established != storm || r.Done != storm {
		t.Errorf("%d of %d peers have a session, %d of them an echo reply", r.Established, storm, r.Done)
	}
	if r.NoReply != 0 || r.Replies < storm {
		t.Errorf("%d echo replies, %d peers without one", r.Replies, r.NoReply)
	}
	if r.BadPackets != 0 || r.SendErrors != 0 {
		t.Errorf("%d packets failed to authenticate or parse, %d send errors", r.BadPackets, r.SendErrors)
	}
	// The gateway's own view: as many peers with a handshake.
	if got := b.handshakes(); got != storm {
		t.Errorf("the gateway has %d peers with a handshake, want %d", got, storm)
	}
}
