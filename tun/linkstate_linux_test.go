package tun

import (
	"slices"
	"testing"
)

// TestLinkTracker feeds a sequence of looks to one tracker and checks the
// events each calls for: a first look is reported in full, later ones only
// for what changed, and EventDown only after the interface was once up.
func TestLinkTracker(t *testing.T) {
	a, b := nsID{dev: 4, ino: 100}, nsID{dev: 4, ino: 200}
	steps := []struct {
		name   string
		forget bool
		look   linkLook
		want   []Event
	}{
		{"first look, down", false, linkLook{a, 1420, false}, []Event{EventMTUUpdate}},
		{"nothing changed", false, linkLook{a, 1420, false}, nil},
		{"MTU changed", false, linkLook{a, 9000, false}, []Event{EventMTUUpdate}},
		{"came up", false, linkLook{a, 9000, true}, []Event{EventUp}},
		{"still up", false, linkLook{a, 9000, true}, nil},
		{"moved on, same MTU", false, linkLook{b, 9000, true}, []Event{EventMTUUpdate}},
		{"went down, MTU changed", false, linkLook{b, 2000, false}, []Event{EventDown, EventMTUUpdate}},
		{"after a pause, in full", true, linkLook{b, 2000, false}, []Event{EventDown, EventMTUUpdate}},
		{"up after a pause", true, linkLook{a, 1280, true}, []Event{EventUp, EventMTUUpdate}},
	}
	var tr linkTracker
	for _, s := range steps {
		if s.forget {
			tr.forget()
		}
		if got := tr.observe(s.look); !slices.Equal(got, s.want) {
			t.Errorf("%s: events %v, want %v", s.name, got, s.want)
		}
	}
}

// TestLinkTrackerNeverUp: an interface that was never up gives no
// EventDown, as with wireguard-go.
func TestLinkTrackerNeverUp(t *testing.T) {
	var tr linkTracker
	if got := tr.runningNow(false, nil); got != nil {
		t.Errorf("down before ever up: %v, want none", got)
	}
	if got := tr.runningNow(true, nil); !slices.Equal(got, []Event{EventUp}) {
		t.Errorf("up: %v", got)
	}
	if got := tr.runningNow(false, nil); !slices.Equal(got, []Event{EventDown}) {
		t.Errorf("down after up: %v", got)
	}
}
