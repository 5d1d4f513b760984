package exit

import (
	"context"
	"net/netip"
	"syscall"
	"testing"
)

// TestHostUDPNoBroadcast: the exit's host UDP sockets leave SO_BROADCAST
// off (Go sets it on every UDP socket), so the kernel refuses a
// broadcast destination the policy did not know of.
func TestHostUDPNoBroadcast(t *testing.T) {
	c, err := dialHostUDP(context.Background(), netip.MustParseAddrPort("127.0.0.1:9"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	rc.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST) })
	if gerr != nil || v != 0 {
		t.Errorf("SO_BROADCAST = %d, %v; want 0", v, gerr)
	}
}
