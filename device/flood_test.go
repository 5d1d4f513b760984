package device

import (
	"testing"
	"time"

	"github.com/fips-go/fips-go/device/ratelimit"
)

// Cookie mode (MAC2 required) holds for ratelimit.LoadHold after the
// handshake queue was last a quarter full, instead of ending the moment it
// drains (issue 13: a burst of 1,024 initiations still bought 260-300 DH
// computations when load was decided per message).
func TestUnderLoadHoldsAfterTheQueueDrains(t *testing.T) {
	// Only the queue matters here: a bare Device, no goroutines to drain it.
	d := &Device{hsq: make(chan *hsMsg, 1024)}
	now := time.Unix(5000, 0)
	for len(d.hsq) < cap(d.hsq)/4 {
		d.hsq <- nil
	}
	if !d.underLoad(now) {
		t.Fatal("not under load with the queue a quarter full")
	}
	for len(d.hsq) > 0 {
		<-d.hsq
	}
	if !d.underLoad(now.Add(ratelimit.LoadHold / 2)) {
		t.Fatal("load mode ended as soon as the queue drained")
	}
	if d.underLoad(now.Add(ratelimit.LoadHold)) {
		t.Fatal("load mode outlasted its hold time")
	}
}
