package exit

import (
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
	"golang.org/x/sys/unix"
)

// TestPingOpenTwice: two echo requests for a new mapping that both found
// none (concurrent deliveries can) share one socket and one flow, and the
// mapping stays while that flow lives.
func TestPingOpenTwice(t *testing.T) {
	if os.Geteuid() != 0 {
		netnstest.SkipOrFail(t, "needs root for a network namespace that allows ping sockets")
	}
	_, e := setup(t, netip.AddrPort{})
	key := pingKey{clientAddr, netip.MustParseAddr("127.0.0.1"), 7}
	var f1, f2 *pingFlow
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked: the thread leaves the test's namespace and
		// ends with this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/ping_group_range", []byte("0 2147483647"), 0); err != nil {
			t.Errorf("allow ping sockets: %v", err)
			return
		}
		f1 = e.openPing(key)
		f2 = e.openPing(key)
	}()
	<-done
	if t.Failed() {
		return
	}
	if f1 == nil || f2 != f1 {
		t.Fatalf("second open of the same mapping: %p, first %p; want the first", f2, f1)
	}
	if n := counter(e, "exit_icmp_flows_open"); n != 1 {
		t.Fatalf("icmp flows open %d, want 1", n)
	}
	e.ping.mu.Lock()
	got := e.ping.flows[key]
	e.ping.mu.Unlock()
	if got != f1 {
		t.Fatalf("mapping %p, want %p", got, f1)
	}
}
