package conn

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// requireRoot skips a test that needs root, unless FIPS_E2E=1 demands that
// it runs, in which case it fails.
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	reason := "needs root to " + why
	if os.Getenv("FIPS_E2E") == "1" {
		t.Fatalf("FIPS_E2E=1 but %s", reason)
	}
	t.Skip(reason)
}

// inNetns runs f on a thread moved into a fresh network namespace whose
// loopback is up with the given MTU, so sockets f opens live there and
// only there. The thread is never unlocked: the runtime retires it when
// the goroutine ends, and the namespace lives on while its sockets do.
// f runs off the test goroutine, so it returns an error instead of
// calling t.Fatal.
func inNetns(t *testing.T, loMTU int, f func() error) {
	t.Helper()
	requireRoot(t, "create a network namespace")
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		if err := setLoopback(loMTU); err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// setLoopback sets lo's MTU and brings it up, with ioctls so no command
// has to be started from the namespaced thread.
func setLoopback(mtu int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for ioctl: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint32(uint32(mtu))
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFMTU, ifr); err != nil {
		return fmt.Errorf("lo mtu %d: %w", mtu, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}
