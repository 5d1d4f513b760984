package device

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun/memtun"
)

type eventLog struct {
	mu     sync.Mutex
	events []PeerEvent
}

func (l *eventLog) add(e PeerEvent) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) all() []PeerEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func (l *eventLog) kinds(peer noise.PublicKey) []PeerEventKind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ks []PeerEventKind
	for _, e := range l.events {
		if e.Peer == peer {
			ks = append(ks, e.Kind)
		}
	}
	return ks
}

// Each side hears of its peer's endpoint, of the handshake (the initiator
// when the response arrives, the responder when the first packet under the
// new keys does) and, once nothing has been sent for three times
// RejectAfterTime, of the session's expiry; each event once, in order.
func TestPeerEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		leakcheck.Check(t)
		var logA, logB eventLog
		netw := membind.NewNetwork(membind.NetOptions{})
		hostA, hostB := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
		a := newNode(t, memtun.New("a", 1420, 64), netw.NewBind(hostA), addrA, hostA, Options{OnPeerEvent: logA.add})
		b := newNode(t, memtun.New("b", 1420, 64), netw.NewBind(hostB), addrB, hostB, Options{OnPeerEvent: logB.add})
		link(t, a, b)
		start := time.Now()
		a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1, 100))
		next(t, b.tun, time.Minute)
		synctest.Wait()
		want := []PeerEventKind{EndpointChanged, HandshakeCompleted}
		if got := logA.kinds(b.key.PublicKey()); !slices.Equal(got, want) {
			t.Fatalf("initiator's events %v, want %v", got, want)
		}
		if got := logB.kinds(a.key.PublicKey()); !slices.Equal(got, want) {
			t.Fatalf("responder's events %v, want %v", got, want)
		}
		for _, l := range []*eventLog{&logA, &logB} {
			for _, e := range l.all() {
				if !e.At.Equal(start) {
					t.Fatalf("%v at %v, want the start (%v): no time passed", e.Kind, e.At, start)
				}
			}
		}
		if e := logA.all()[0]; e.Endpoint != b.ep {
			t.Fatalf("initiator's endpoint event says %v, want %v", e.Endpoint, b.ep)
		}
		if e := logB.all()[0]; e.Endpoint != a.ep {
			t.Fatalf("responder's endpoint event says %v, want %v (learnt from the initiation)", e.Endpoint, a.ep)
		}

		time.Sleep(3*noise.RejectAfterTime + time.Minute)
		synctest.Wait()
		want = append(want, SessionExpired)
		for name, l := range map[string]*eventLog{"a": &logA, "b": &logB} {
			peer := a.key.PublicKey()
			if l == &logA {
				peer = b.key.PublicKey()
			}
			if got := l.kinds(peer); !slices.Equal(got, want) {
				t.Fatalf("%s's events after idling %v, want %v", name, got, want)
			}
			if at := l.all()[2].At.Sub(start); at < 3*noise.RejectAfterTime || at > 3*noise.RejectAfterTime+time.Minute {
				t.Fatalf("%s: session expired %v after the handshake, want 3 x RejectAfterTime (%v)", name, at, 3*noise.RejectAfterTime)
			}
		}
	})
}
