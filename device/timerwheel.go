package device

import (
	"container/heap"
	"sync"
	"time"

	"github.com/fips-go/fips-go/device/timers"
)

// timerWheel runs every peer's protocol timers from one goroutine: a heap
// of peers ordered by their next deadline. A peer with nothing armed is not
// in the heap, so idle peers cost neither goroutines nor wakeups.
type timerWheel struct {
	d    *Device
	mu   sync.Mutex // guards h and every Peer.heapIdx/wheelAt
	h    peerHeap
	wake chan struct{}
}

func newTimerWheel(d *Device) *timerWheel {
	return &timerWheel{d: d, wake: make(chan struct{}, 1)}
}

// schedule makes the wheel visit p at 'at' (zero removes p).
func (w *timerWheel) schedule(p *Peer, at time.Time) {
	w.mu.Lock()
	switch {
	case at.IsZero():
		if p.heapIdx >= 0 {
			heap.Remove(&w.h, p.heapIdx)
		}
	case p.heapIdx >= 0:
		p.wheelAt = at
		heap.Fix(&w.h, p.heapIdx)
	default:
		p.wheelAt = at
		heap.Push(&w.h, p)
	}
	first := len(w.h) > 0 && w.h[0] == p
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *timerWheel) run() {
	defer w.d.helpersWG.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		now := w.d.now()
		w.mu.Lock()
		var due *Peer
		wait := time.Hour
		if len(w.h) > 0 {
			if at := w.h[0].wheelAt; !at.After(now) {
				due = heap.Pop(&w.h).(*Peer)
			} else {
				wait = at.Sub(now)
			}
		}
		w.mu.Unlock()
		if due != nil {
			due.runTimers(now)
			continue
		}
		t.Reset(wait)
		select {
		case <-w.d.stop:
			return
		case <-w.wake:
		case <-t.C:
		}
	}
}

// runTimers performs the actions whose deadlines passed, frees the buffers
// of a peer gone idle, and hands the next deadline back to the wheel.
func (p *Peer) runTimers(now time.Time) {
	idleCheck := p.releaseIfIdle(now) // before p.mu, which ranks below the flush locks
	p.mu.Lock()
	if p.removed.Load() {
		p.mu.Unlock()
		return
	}
	act := p.timers.Due(now)
	sendStaged := p.stagedDue
	p.stagedDue = false
	var dropped int
	if act&timers.GiveUp != 0 {
		dropped = p.dropStagedLocked()
	}
	next := p.timers.Next()
	if !idleCheck.IsZero() && (next.IsZero() || idleCheck.Before(next)) {
		next = idleCheck
	}
	p.scheduledAt = next
	if !next.IsZero() {
		p.d.wheel.schedule(p, next)
	}
	p.mu.Unlock()
	d := p.d
	if sendStaged {
		p.sendStagedNow(now)
	}
	if dropped > 0 {
		d.ctr.add(cTxStagedDropped, uint64(dropped))
	}
	if act&timers.GiveUp != 0 {
		d.ctr.inc(cHandshakeGaveUp)
	}
	if act&timers.ZeroKeys != 0 {
		d.ctr.inc(cKeysZeroed)
		p.zeroKeys()
		p.emit(SessionExpired, now)
	}
	if act&timers.SendInitiation != 0 {
		p.initiate(now, true)
	}
	if act&timers.SendKeepalive != 0 {
		p.sendKeepalive(now)
	}
	p.runProbe(now)
}

// peerHeap orders peers by wheelAt; container/heap keeps heapIdx current.
type peerHeap []*Peer

func (h peerHeap) Len() int           { return len(h) }
func (h peerHeap) Less(i, j int) bool { return h[i].wheelAt.Before(h[j].wheelAt) }
func (h peerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}
func (h *peerHeap) Push(x any) {
	p := x.(*Peer)
	p.heapIdx = len(*h)
	*h = append(*h, p)
}
func (h *peerHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	p.heapIdx = -1
	return p
}
