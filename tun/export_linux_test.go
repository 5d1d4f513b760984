package tun

// WriteCounts reports how many write syscalls a kernel TUN made and how many
// packets they carried, for tests that check coalescing happened.
func WriteCounts(d Device) (writes, packets uint64) {
	if k, ok := d.(*kernelDevice); ok && k.gro != nil {
		return k.gro.writes.Load(), k.gro.packets.Load()
	}
	return 0, 0
}
