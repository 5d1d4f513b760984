// Package tun is where packets enter and leave the tunnel on the local side:
// a real Linux TUN (through golang.zx2c4.com/wireguard/tun, offloads on),
// and, in sub-packages, our gVisor netstack backend and an in-memory TUN.
package tun

import (
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// Device is the TUN contract the data path uses. It is wireguard-go's
// tun.Device interface so that the kernel TUN from that package, our netstack
// backend and test fakes are interchangeable:
//
//   - Read fills up to len(bufs) packets at bufs[i][offset:], setting sizes[i];
//     offloaded super-packets are split into MTU-sized packets here.
//   - Write writes bufs[i][offset:], which may be coalesced (GRO); it may use
//     the offset bytes in front of each packet as scratch space, so callers
//     must leave at least Headroom bytes there.
//   - BatchSize is the most packets one Read returns.
//   - Close makes blocked Reads return and the Events channel close.
type Device = wgtun.Device

// Event is a TUN state change (up, down, MTU update).
type Event = wgtun.Event

// Events a Device reports.
const (
	EventUp        = wgtun.EventUp
	EventDown      = wgtun.EventDown
	EventMTUUpdate = wgtun.EventMTUUpdate
)

// Headroom is the space the data path leaves in front of every packet it
// reads from or writes to a Device: enough for the 16-byte WireGuard transport
// header, which also covers the 10-byte virtio-net header the kernel TUN needs.
const Headroom = 16
