package timers

import (
	"testing"
	"time"

	"github.com/fips-go/fips-go/device/noise"
)

func TestRekeyOnSend(t *testing.T) {
	p := DefaultParams()
	for _, tc := range []struct {
		age       time.Duration
		initiator bool
		count     uint64
		want      bool
	}{
		{0, true, 0, false},
		{120*time.Second - time.Nanosecond, true, 0, false},
		{120 * time.Second, true, 0, true},
		{time.Hour, false, 0, false}, // only the initiator rekeys on age
		{0, false, noise.RekeyAfterMessages - 1, false},
		{0, false, noise.RekeyAfterMessages, true},
		{0, true, noise.RekeyAfterMessages, true},
	} {
		if got := p.RekeyOnSend(t0, tc.initiator, tc.count, at(tc.age)); got != tc.want {
			t.Errorf("RekeyOnSend(age %v, initiator %v, count %d) = %v, want %v",
				tc.age, tc.initiator, tc.count, got, tc.want)
		}
	}
	// Zero Params means the defaults.
	if !(Params{}).RekeyOnSend(t0, true, 0, at(120*time.Second)) {
		t.Error("zero Params does not rekey at 120 s")
	}
}

func TestRekeyOnReceive(t *testing.T) {
	p := Params{}
	// 180 - 10 - 5 = 165 s.
	if p.RekeyOnReceive(t0, true, at(165*time.Second-time.Nanosecond)) {
		t.Error("rekey on receive before 165 s")
	}
	if !p.RekeyOnReceive(t0, true, at(165*time.Second)) {
		t.Error("no rekey on receive at 165 s")
	}
	if p.RekeyOnReceive(t0, false, at(time.Hour)) {
		t.Error("responder rekeys on receive")
	}
	short := Params{RejectAfterTime: 30 * time.Second, KeepaliveTimeout: 2 * time.Second, RekeyTimeout: time.Second}
	if short.RekeyOnReceive(t0, true, at(27*time.Second-1)) || !short.RekeyOnReceive(t0, true, at(27*time.Second)) {
		t.Error("custom params not honoured")
	}
}

func TestExpired(t *testing.T) {
	p := Params{}
	if p.Expired(t0, at(180*time.Second-time.Nanosecond)) {
		t.Error("expired before 180 s")
	}
	if !p.Expired(t0, at(180*time.Second)) {
		t.Error("not expired at 180 s")
	}
	// A clock that went backwards does not expire anything.
	if p.Expired(t0, at(-time.Hour)) {
		t.Error("negative age counted as expired")
	}
}
