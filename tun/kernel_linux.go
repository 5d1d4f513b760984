package tun

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	wgtun "golang.zx2c4.com/wireguard/tun"
)

// createKernel opens /dev/net/tun through wireguard-go's tun package, which
// turns on IFF_VNET_HDR and the TSO (and, from Linux 6.2, USO) offloads: one
// read then returns up to 64 KiB of TCP that it splits into packets, which is
// what makes a kernel TUN fast.
func createKernel(name string, mtu int) (Device, error) {
	d, err := wgtun.CreateTUN(name, mtu)
	if err != nil {
		return nil, fmt.Errorf("tun: create %q: %w", name, err)
	}
	return newKernelDevice(d), nil
}

func createKernelFromFile(f *os.File, mtu int) (Device, error) {
	d, err := wgtun.CreateTUNFromFile(f, mtu)
	if err != nil {
		return nil, fmt.Errorf("tun: open TUN from %s: %w", f.Name(), err)
	}
	return newKernelDevice(d), nil
}

// kernelDevice wraps wireguard-go's Linux TUN for two reasons. Write must
// return a packet count as the Device contract says (wireguard-go returns
// bytes). And MTU and Events must follow the interface into whatever
// network namespace it was moved to: wireguard-go asks for the MTU by name
// in our namespace and listens for link events there, so after
// `ip link set IFACE netns NS` it never learns a new MTU and the data path
// drops every packet that outgrew its buffers.
type kernelDevice struct {
	wgtun.Device
	file   *os.File     // the TUN, which can tell where its interface lives
	gro    *groWriter   // our write path; nil without a virtio-net header
	split  *splitReader // our read path; nil likewise
	own    nsID         // our namespace: sockets there need no setns
	events chan Event   // ours, closed once both sources below have stopped
	done   chan struct{}

	// following is true while our link listener (follow) is the source of
	// events; otherwise wireguard-go's own events are passed on, which is
	// also the fallback where setns is not permitted.
	following atomic.Bool
	closeOnce sync.Once
	// openRoute opens route sockets in other namespaces when set
	// (UseRouteSockets); nil: the device joins them itself.
	openRoute atomic.Pointer[func(groups uint32) (*os.File, error)]

	mu  sync.Mutex // guards cur
	cur *nsSocket  // the listener's socket while the interface is in our namespace; else nil
}

func newKernelDevice(inner wgtun.Device) *kernelDevice {
	d := &kernelDevice{
		Device: inner,
		file:   inner.File(),
		events: make(chan Event, 8),
		done:   make(chan struct{}),
	}
	if vnet, udp := offloads(d.file); vnet {
		d.gro = newGROWriter(d.file, udp)
		d.split = newSplitReader(d.file)
	}
	var s *nsSocket
	own, err := ownNetns()
	if err == nil {
		d.own = own
		// Subscribe before returning, so that no change made right after
		// Create (a script moving the interface) goes unheard.
		s, err = d.subscribe()
		if errors.Is(err, errAway) {
			err = nil // handed a TUN whose interface lives elsewhere: poll it
		}
	}
	follows := err == nil
	if follows {
		d.cur = s
		d.following.Store(true)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		d.passInner()
	}()
	go func() {
		defer wg.Done()
		if follows {
			d.follow(s)
		}
	}()
	go func() {
		wg.Wait()
		close(d.events)
	}()
	return d
}

var (
	_ Device = (*kernelDevice)(nil)
	_ Device = (*detachedDevice)(nil)
)

// Read implements Device.
func (d *kernelDevice) Read(bufs [][]byte, sizes []int, offset int) (n int, err error) {
	if d.split != nil {
		n, err = d.split.read(bufs, sizes, offset)
	} else {
		n, err = readWG(d.Device, bufs, sizes, offset)
	}
	return n, readErr(d, err)
}

// Write implements Device. On error no count of packets is known, so it
// reports 0 along with the error.
func (d *kernelDevice) Write(bufs [][]byte, offset int) (int, error) {
	if d.gro != nil {
		if err := d.gro.write(bufs, offset); err != nil {
			return 0, err
		}
		return len(bufs), nil
	}
	if _, err := d.Device.Write(bufs, offset); err != nil {
		return 0, err
	}
	return len(bufs), nil
}

// Events implements Device: EventUp, EventDown and EventMTUUpdate for the
// interface wherever it lives; closed after Close.
func (d *kernelDevice) Events() <-chan Event { return d.events }

// Close implements Device. It stops our listener first, then wireguard-go's
// device, whose events channel closing ends passInner.
func (d *kernelDevice) Close() error {
	d.closeOnce.Do(func() {
		close(d.done)
		d.mu.Lock()
		if d.cur != nil {
			d.cur.f.Close()
			d.cur = nil
		}
		d.mu.Unlock()
	})
	return d.Device.Close()
}

// send delivers one event unless the device is closing: nobody may be
// reading any more then.
func (d *kernelDevice) send(e Event) {
	select {
	case d.events <- e:
	case <-d.done:
	}
}

// passInner drains wireguard-go's events, which it would otherwise block
// on, and passes them on while our listener is not running.
func (d *kernelDevice) passInner() {
	for e := range d.Device.Events() {
		if !d.following.Load() {
			d.send(fromWG(e))
		}
	}
}
