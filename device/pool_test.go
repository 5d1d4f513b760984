package device

import "testing"

// TestPoolHoldsItsPeakNotItsCap: a pool of 48 whose load never has more
// than 3 batches out at once allocates buffers for 3, however many times
// they cycle, and hands back the batch released last.
func TestPoolHoldsItsPeakNotItsCap(t *testing.T) {
	p := newBatchPool(48, 8, 64)
	stop := make(chan struct{})
	for range 1000 {
		var out [3]*batch
		for i := range out {
			if out[i] = p.get(stop); out[i] == nil {
				t.Fatal("get returned nil")
			}
		}
		if got := p.inUse(); got != 3 {
			t.Fatalf("inUse = %d, want 3", got)
		}
		for _, b := range out {
			b.release()
		}
	}
	allocated := 0
	for _, b := range p.stack {
		if b.bufs != nil {
			allocated++
		}
	}
	if allocated != 3 || len(p.stack) != 48 || p.inUse() != 0 {
		t.Fatalf("%d of %d free batches allocated (want 3), %d in use", allocated, len(p.stack), p.inUse())
	}
	last := p.tryGet()
	last.release()
	if again := p.tryGet(); again != last {
		t.Fatal("the batch released last was not handed out next")
	}
}

// TestPoolWaitsWhenEmpty: get blocks with every batch out and returns nil on
// stop; tryGet returns nil at once.
func TestPoolWaitsWhenEmpty(t *testing.T) {
	p := newBatchPool(2, 1, 16)
	stop := make(chan struct{})
	a, b := p.get(stop), p.get(stop)
	if p.tryGet() != nil {
		t.Fatal("tryGet on an empty pool returned a batch")
	}
	got := make(chan *batch)
	go func() { got <- p.get(stop) }()
	a.release()
	if c := <-got; c != a {
		t.Fatal("the waiting get did not receive the released batch")
	}
	go func() { got <- p.get(stop) }()
	close(stop)
	if c := <-got; c != nil {
		t.Fatal("get returned a batch after stop")
	}
	b.release()
}
