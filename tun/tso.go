package tun

// The kernel's TCP arithmetic for TSO super-packets through a TUN: what a
// device needs to size the interface's GSO maximum so that super-packets
// hold at most a given number of segments.

// TCPMaxHeaders is the most IP and TCP header a full-size segment carries
// in practice: IPv6 (40), TCP (20) and its timestamp option (12). The
// smallest MSS at an MTU is the MTU less this, and the kernel's TCP cuts a
// super-packet into the most segments at the smallest MSS.
const TCPMaxHeaders = 40 + 20 + 12

// LegacyGSOMax is the kernel's default GSO maximum (GSO_LEGACY_MAX_SIZE).
const LegacyGSOMax = 1 << 16

// MinTCPMSS returns the smallest MSS the kernel's TCP uses at mtu, and
// false when the MTU leaves no room for a TCP segment.
func MinTCPMSS(mtu int) (int, bool) {
	mss := mtu - TCPMaxHeaders
	return mss, mss > 0
}

// GSOMaxForSegments returns the GSO maximum that keeps the kernel's TCP
// super-packets at or below n segments of mss or more. TCP sizes a
// super-packet to the interface's GSO maximum less its own header reserve
// (MAX_TCP_HEADER, a few hundred bytes) in whole segments, so one byte
// short of n+1 segments is at most n whatever the reserve.
func GSOMaxForSegments(mss, n int) int { return (n+1)*mss - 1 }
