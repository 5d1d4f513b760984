package interop

import (
	"sync"

	"github.com/fips-go/fips-go/tun"
)

// pingIdent is the ICMP echo identifier of the pings injectTUN originates;
// echo replies carrying it are taken out of the write path.
const pingIdent = 0xf195

// injectTUN wraps the TUN of a fips-go device so the test can send raw
// ICMP echo requests as if the host's stack had sent them, and catch the
// replies before they reach that stack. Our netstack has no ping socket, so
// this is how the fips-go side originates pings: the packets still take the
// whole path (TUN read, routing, encryption, UDP, the peer's stack, back).
//
// A pump goroutine reads the wrapped device into its own buffers so Read
// can wait for either those or an injected packet; Read copies out of them.
// That costs a copy and a hand-off per batch, which is fine for tests.
type injectTUN struct {
	tun.Device

	inject  chan []byte    // packets for Read to return
	replies chan []byte    // captured echo replies with pingIdent
	results chan readBatch // pump -> Read
	free    chan struct{}  // Read -> pump: the batch has been copied out
	done    chan struct{}  // closed by Close
	once    sync.Once
	pumpWG  sync.WaitGroup

	mu      sync.Mutex // serialises Read; guards pending and next
	pending readBatch
	next    int
}

// readBatch is one Read of the wrapped device, in the pump's buffers.
type readBatch struct {
	bufs  [][]byte
	sizes []int
	n     int
	err   error
}

var _ tun.Device = (*injectTUN)(nil)

func newInjectTUN(inner tun.Device) *injectTUN {
	t := &injectTUN{
		Device:  inner,
		inject:  make(chan []byte),
		replies: make(chan []byte, 16),
		results: make(chan readBatch),
		free:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	mtu, err := inner.MTU()
	if err != nil || mtu <= 0 {
		mtu = 65535
	}
	bs := max(inner.BatchSize(), 1)
	b := readBatch{bufs: make([][]byte, bs), sizes: make([]int, bs)}
	for i := range b.bufs {
		b.bufs[i] = make([]byte, tun.Headroom+mtu)
	}
	t.pumpWG.Add(1)
	go t.pump(b)
	return t
}

// pump reads the wrapped device until it fails or the wrapper closes.
func (t *injectTUN) pump(b readBatch) {
	defer t.pumpWG.Done()
	for {
		b.n, b.err = t.Device.Read(b.bufs, b.sizes, tun.Headroom)
		select {
		case t.results <- b:
		case <-t.done:
			return
		}
		if b.err != nil {
			return
		}
		select {
		case <-t.free:
		case <-t.done:
			return
		}
	}
}

// Read implements tun.Device: the rest of the pump's last batch, else an
// injected packet or the pump's next batch, whichever comes first.
func (t *injectTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.next >= t.pending.n {
		select {
		case p := <-t.inject:
			sizes[0] = copy(bufs[0][offset:], p)
			return 1, nil
		case t.pending = <-t.results:
			t.next = 0
		case <-t.done:
			return 0, tun.ErrGone
		}
	}
	k := 0
	for ; k < len(bufs) && t.next < t.pending.n; k++ {
		p := t.pending.bufs[t.next][tun.Headroom : tun.Headroom+t.pending.sizes[t.next]]
		sizes[k] = copy(bufs[k][offset:], p)
		t.next++
	}
	if t.next < t.pending.n {
		return k, nil
	}
	if t.pending.err != nil {
		return k, t.pending.err
	}
	select {
	case t.free <- struct{}{}:
	case <-t.done:
	}
	return k, nil
}

// Write implements tun.Device, diverting echo replies to injected pings.
func (t *injectTUN) Write(bufs [][]byte, offset int) (int, error) {
	var keep [][]byte // nil until a packet is diverted
	for i, b := range bufs {
		r, ok := parseEchoReply(b[offset:])
		if ok && r.echo.ID == pingIdent {
			if keep == nil {
				keep = append(make([][]byte, 0, len(bufs)), bufs[:i]...)
			}
			select {
			case t.replies <- append([]byte(nil), b[offset:]...):
			default: // nobody is waiting for this many replies
			}
			continue
		}
		if keep != nil {
			keep = append(keep, b)
		}
	}
	if keep == nil {
		return t.Device.Write(bufs, offset)
	}
	if len(keep) > 0 {
		if _, err := t.Device.Write(keep, offset); err != nil {
			return 0, err
		}
	}
	return len(bufs), nil
}

// Close implements tun.Device: it closes the wrapped device and waits for
// the pump.
func (t *injectTUN) Close() error {
	var err error
	t.once.Do(func() {
		close(t.done)
		err = t.Device.Close()
		t.pumpWG.Wait()
	})
	return err
}
