package tun_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/fips-go/fips-go/tun"
)

// TestMTUFollowsNetns moves a TUN's interface into a fresh namespace, as
// `ip link set IFACE netns NS` does with a running fips-go, and changes its
// MTU there, before and after the interface is up: MTU must report each new
// value and an EventMTUUpdate must arrive for it. Then it moves the
// interface on to a second namespace and back to ours.
func TestMTUFollowsNetns(t *testing.T) {
	requireRoot(t)
	name := fmt.Sprintf("fipsn%d", os.Getpid()%100000)
	dev, err := tun.Create(name, 1420)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	events := dev.Events()
	ns1, ns2 := newNetns(t, name+"a"), newNetns(t, name+"b")

	run(t, "ip", "link", "set", name, "netns", ns1)
	setMTU(t, dev, events, ns1, name, 2000)
	run(t, "ip", "-n", ns1, "link", "set", name, "up")
	for _, mtu := range []int{9000, 34736, 1280} {
		setMTU(t, dev, events, ns1, name, mtu)
	}

	run(t, "ip", "-n", ns1, "link", "set", name, "netns", ns2)
	setMTU(t, dev, events, ns2, name, 4000)

	run(t, "ip", "-n", ns2, "link", "set", name, "netns", "1")
	setMTU(t, dev, events, "", name, 1500)

	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("Events not closed within 10s of Close")
		}
	}
}

// TestNetnsDeleteEndsTUN moves the interface into a namespace and deletes
// that namespace, as `ip netns del` after `ip link set IFACE netns NS`
// does: the namespace must really go, taking the interface with it, so a
// blocked Read fails (the daemon stops on that), and following must not
// keep it alive or spin on the dead TUN meanwhile.
func TestNetnsDeleteEndsTUN(t *testing.T) {
	requireRoot(t)
	name := fmt.Sprintf("fipsd%d", os.Getpid()%100000)
	dev, err := tun.Create(name, 1420)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	events := dev.Events()
	ns := fmt.Sprintf("%sns", name)
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "link", "set", name, "netns", ns)
	setMTU(t, dev, events, ns, name, 9000)

	readErr := make(chan error, 1)
	go func() {
		bufs := [][]byte{make([]byte, tun.Headroom+65535)}
		for {
			if _, err := dev.Read(bufs, []int{0}, tun.Headroom); err != nil {
				readErr <- err
				return
			}
		}
	}()
	run(t, "ip", "netns", "del", ns)
	select {
	case err := <-readErr:
		t.Logf("Read after the namespace was deleted: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Read still blocked 10s after the interface's namespace was deleted")
	}
	// However long we wait, a gone interface has nothing more to report.
	n := 0
	for timeout := time.After(3 * time.Second); ; {
		select {
		case _, ok := <-events:
			if !ok {
				t.Fatal("Events closed before Close")
			}
			if n++; n > 4 {
				t.Fatalf("%d events after the interface was gone", n)
			}
			continue
		case <-timeout:
		}
		break
	}
	if err := dev.Close(); err != nil {
		t.Logf("Close: %v", err)
	}
	for range events {
	}
}

// newNetns creates a network namespace named name that the test deletes.
func newNetns(t *testing.T, name string) string {
	t.Helper()
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", name, err, out)
		}
	})
	return name
}

// setMTU sets the interface's MTU inside namespace ns ("" is ours), then
// waits for an EventMTUUpdate after which MTU reports the new value. Events
// of earlier changes are drained first; one still in flight may be read
// before ours, so it keeps reading until one agrees.
func setMTU(t *testing.T, dev tun.Device, events <-chan tun.Event, ns, name string, mtu int) {
	t.Helper()
	for drained := false; !drained; {
		select {
		case <-events:
		default:
			drained = true
		}
	}
	args := []string{"ip"}
	if ns != "" {
		args = append(args, "-n", ns)
	}
	run(t, append(args, "link", "set", name, "mtu", strconv.Itoa(mtu))...)
	got, err := dev.MTU()
	if err != nil || got != mtu {
		t.Fatalf("in %q: MTU = %d, %v after setting %d", ns, got, err, mtu)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("Events closed")
			}
			if e&tun.EventMTUUpdate == 0 {
				continue
			}
			if got, err := dev.MTU(); err == nil && got == mtu {
				return
			}
		case <-deadline:
			t.Fatalf("in %q: no EventMTUUpdate reporting MTU %d within 10s", ns, mtu)
		}
	}
}
