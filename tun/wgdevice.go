package tun

import (
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// wgDevice puts a TUN made by wireguard-go's tun package behind the Device
// contract: where package tun has no implementation of its own (macOS's
// utun, FreeBSD's tun), wireguard-go's is the interface, without offloads
// to split or coalesce. Built, not tested, on those systems.
type wgDevice struct {
	wgtun.Device
	events chan Event
}

var _ Device = (*wgDevice)(nil)

// FromWireGuard wraps d, a TUN from golang.zx2c4.com/wireguard/tun, as a
// Device: Read recovers a panic in d and maps a vanished interface to
// ErrGone, and d's events are relayed as ours. The Device owns d.
func FromWireGuard(d wgtun.Device) Device {
	w := &wgDevice{Device: d, events: make(chan Event, 8)}
	go w.relay()
	return w
}

// relay passes d's events on until d closes its channel (on Close).
func (w *wgDevice) relay() {
	defer close(w.events)
	for e := range w.Device.Events() {
		if ours := fromWG(e); ours != 0 {
			w.events <- ours
		}
	}
}

// fromWG translates wireguard-go's events into ours.
func fromWG(e wgtun.Event) Event {
	var out Event
	if e&wgtun.EventUp != 0 {
		out |= EventUp
	}
	if e&wgtun.EventDown != 0 {
		out |= EventDown
	}
	if e&wgtun.EventMTUUpdate != 0 {
		out |= EventMTUUpdate
	}
	return out
}

// Read implements Device.
func (w *wgDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := readWG(w.Device, bufs, sizes, offset)
	return n, readErr(w, err)
}

// Events implements Device.
func (w *wgDevice) Events() <-chan Event { return w.events }
