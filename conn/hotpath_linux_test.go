package conn

import (
	"bytes"
	"net/netip"
	"testing"
)

// TestSteadyStateAllocs proves the data path allocation-free once warm:
// a Send of a full batch, and the receives that take it in, GSO/GRO on and
// off.
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	for name, o := range map[string]Options{
		"Offloads":  {},
		"NoOffload": {DisableGSO: true, DisableGRO: true},
	} {
		t.Run(name, func(t *testing.T) {
			a, b := openEnd(t, o), openEnd(t, o)
			batch := burst(128, 1420)
			batch[127] = batch[127][:600]
			ep := Endpoint{Dst: b.at(lo4), Src: lo4}
			bufs, sizes, eps := rxBufs(128, 2048)
			roundTrip := func() {
				if err := a.b.Send(batch, ep); err != nil {
					t.Fatal(err)
				}
				for got := 0; got < len(batch); {
					n, err := b.fns[0](bufs, sizes, eps)
					if err != nil {
						t.Fatal(err)
					}
					got += n
				}
			}
			if n := testing.AllocsPerRun(50, roundTrip); n != 0 {
				t.Fatalf("Send+receive of a batch: %v allocations per run", n)
			}
			if !bytes.Equal(bufs[0][:sizes[0]], batch[0]) {
				t.Fatal("payload changed on the way")
			}
			// Send alone, the receiver not reading: whatever the kernel
			// drops once the socket buffer is full is not our concern.
			if n := testing.AllocsPerRun(50, func() {
				if err := a.b.Send(batch, ep); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Fatalf("Send of a batch: %v allocations per run", n)
			}
		})
	}
}

// FuzzGROSplit drives the split of a coalesced message: any message length,
// segment size and receive buffer sizes. The datagrams handed out must be
// the message cut every seg bytes, in order, with the message's endpoint,
// those that do not fit even the first buffer dropped and counted, and
// nothing else.
func FuzzGROSplit(f *testing.F) {
	f.Add(uint16(3000), uint16(1000), []byte{200})
	f.Add(uint16(0), uint16(0), []byte{1})
	f.Add(uint16(64000), uint16(1420), []byte{6, 1, 255})
	f.Add(uint16(10), uint16(20), []byte{0})
	f.Fuzz(func(t *testing.T, length, seg uint16, bufSizes []byte) {
		if len(bufSizes) == 0 || len(bufSizes) > 64 {
			return
		}
		data := make([]byte, length)
		for i := range data {
			data[i] = byte(i * 31)
		}
		r := &receiver{stats: &counters{}, held: make([]heldMsg, 1)}
		ep := Endpoint{Dst: netip.MustParseAddrPort("192.0.2.1:51820"), Src: lo4, SrcIfIndex: 1}
		s, left := int(seg), 1
		if s > 0 && int(length) > s {
			left = (int(length) + s - 1) / s
		} else {
			s = int(length)
		}
		r.held[0] = heldMsg{data: data, seg: s, left: left, ep: ep}
		r.nheld = 1
		bufs := make([][]byte, len(bufSizes))
		for i, n := range bufSizes {
			bufs[i] = make([]byte, int(n)*8)
		}
		sizes, eps := make([]int, len(bufs)), make([]Endpoint, len(bufs))
		var expect [][]byte
		for off, k := 0, 0; k < left; k++ {
			end := min(off+s, len(data))
			expect = append(expect, data[off:end])
			off = end
		}
		var delivered [][]byte
		for r.next < r.nheld {
			n, _ := r.drain(bufs, sizes, eps)
			for i := range n {
				if eps[i] != ep {
					t.Fatalf("endpoint %+v", eps[i])
				}
				delivered = append(delivered, append([]byte{}, bufs[i][:sizes[i]]...))
			}
		}
		// Replay which datagrams had a buffer large enough: a datagram that
		// does not fit ends the call and is tried again at bufs[0] in the
		// next; one that does not fit bufs[0] is handed back once and then,
		// offered the same buffers again, dropped.
		var fit [][]byte
		drops := uint64(0)
		for i, j := 0, 0; i < len(expect); {
			switch {
			case len(expect[i]) <= len(bufs[j]):
				fit = append(fit, expect[i])
				i++
				if j++; j == len(bufs) {
					j = 0
				}
			case j > 0:
				j = 0
			default:
				drops++
				i++
			}
		}
		if len(delivered) != len(fit) || r.stats.rxOversize.Load() != drops {
			t.Fatalf("delivered %d (want %d), dropped %d (want %d)", len(delivered), len(fit), r.stats.rxOversize.Load(), drops)
		}
		for i := range fit {
			if !bytes.Equal(delivered[i], fit[i]) {
				t.Fatalf("datagram %d differs", i)
			}
		}
	})
}

// A held datagram too big for the caller's buffers is handed back unread
// once, so a caller whose buffers predate an MTU raise can come back with
// larger ones and get it; offered the same small buffers again, it is
// dropped and counted (issue 8: the first datagram at a raised MTU was lost
// at every hop).
func TestDrainHandsBackOversizeOnce(t *testing.T) {
	data := bytes.Repeat([]byte{7}, 2000)
	hold := func() *receiver {
		r := &receiver{stats: &counters{}, held: make([]heldMsg, 1)}
		r.held[0] = heldMsg{data: data, seg: len(data), left: 1}
		r.nheld = 1
		return r
	}
	small := [][]byte{make([]byte, 1536)}
	big := [][]byte{make([]byte, 4096)}
	sizes, eps := make([]int, 1), make([]Endpoint, 1)

	r := hold()
	if n, refused := r.drain(small, sizes, eps); n != 0 || !refused {
		t.Fatalf("first offer of small buffers: %d delivered, refused %v; want 0, true", n, refused)
	}
	if n, _ := r.drain(big, sizes, eps); n != 1 || sizes[0] != len(data) || r.stats.rxOversize.Load() != 0 {
		t.Fatalf("with larger buffers: %d delivered (%d bytes), %d dropped; want the datagram whole", n, sizes[0], r.stats.rxOversize.Load())
	}

	r = hold()
	r.drain(small, sizes, eps)
	if n, refused := r.drain(small, sizes, eps); n != 0 || refused || r.stats.rxOversize.Load() != 1 {
		t.Fatalf("second offer of the same small buffers: %d delivered, refused %v, %d dropped; want it dropped", n, refused, r.stats.rxOversize.Load())
	}
}
