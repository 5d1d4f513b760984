package privsep

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
	"github.com/fips-go/fips-go/tun"
	"golang.org/x/sys/unix"
)

// TestMonitor: a TUN device told to ask the monitor for its route
// sockets (tun's UseRouteSockets) follows its interface's MTU into the
// namespace it was moved to; the monitor answers a malformed request
// with EINVAL and goes on; Exit removes the socket file and lets go of
// the TUN; and the monitor stops when the worker's end closes.
func TestMonitor(t *testing.T) {
	if os.Geteuid() != 0 {
		netnstest.SkipOrFail(t, "needs root to create a TUN and a namespace")
	}
	name := netnstest.UniqueName("fpsm")
	dev, err := tun.Create(name, 1420)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	dup := dupFile(t, dev.File())
	sockPath := filepath.Join(t.TempDir(), name+".sock")
	ln, err := net.Listen("unix", sockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln.(*net.UnixListener).SetUnlinkOnClose(false)

	mon, wrk, err := Pair()
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMonitor(mon, dup, sockPath)
	mon.Close()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { m.Serve(); close(served) }()
	c, err := NewClient(wrk)
	if err != nil {
		t.Fatal(err)
	}
	rs, ok := dev.(interface {
		UseRouteSockets(func(groups uint32) (*os.File, error))
	})
	if !ok {
		t.Fatalf("%T has no UseRouteSockets", dev)
	}
	// The device asks from its MTU reader and its link follower at once.
	var asked atomic.Int32
	rs.UseRouteSockets(func(groups uint32) (*os.File, error) {
		asked.Add(1)
		return c.RouteSocket(groups)
	})

	ns := netnstest.New(t, "fpsm")
	ns.Run("true")
	run(t, "ip", "link", "set", name, "netns", ns.Name)
	run(t, "ip", "-n", ns.Name, "link", "set", name, "mtu", "2000")
	if mtu, err := dev.MTU(); err != nil || mtu != 2000 {
		t.Fatalf("MTU after the move = %d, %v; want 2000", mtu, err)
	}
	if asked.Load() == 0 {
		t.Fatal("the device did not ask for a route socket in the interface's namespace")
	}
	f, err := c.RouteSocket(1)
	if err != nil {
		t.Fatalf("route socket for link events: %v", err)
	}
	f.Close()

	if err := unix.Sendmsg(c.fd, []byte{1, 2, 3}, nil, nil, 0); err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	if n, err := unix.Read(c.fd, b[:]); err != nil || n != answerSize || unix.Errno(b[0]) != unix.EINVAL {
		t.Fatalf("answer to a 3-byte request: %x, %v; want EINVAL", b[:n], err)
	}
	if _, err := c.RouteSocket(4); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("route socket for groups 4: %v, want ErrBadRequest", err)
	}

	if err := c.Exit(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sockPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file after Exit: %v", err)
	}
	if _, err := c.RouteSocket(0); !errors.Is(err, unix.EBADF) {
		t.Errorf("route socket after Exit: %v, want EBADF", err)
	}
	unix.Close(c.fd)
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return once the worker's end closed")
	}
}

// TestRemoveSocketKeepsOthers: a socket file that replaced the daemon's
// (another daemon of the same name) is not removed.
func TestRemoveSocketKeepsOthers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.sock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Held open, as the worker's bound socket holds the daemon's, so that
	// the replacement cannot be given the same inode.
	held, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	m := &Monitor{socket: path, ident: fi}
	os.Remove(path)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m.RemoveSocket()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the replacement was removed: %v", err)
	}
}

func TestPickUID(t *testing.T) {
	const n = LastUID - FirstUID + 1
	if uid, err := PickUID(5, func(int) bool { return false }); err != nil || uid != FirstUID+5 {
		t.Errorf("PickUID(5, none taken) = %d, %v", uid, err)
	}
	if uid, err := PickUID(n+5, func(int) bool { return false }); err != nil || uid != FirstUID+5 {
		t.Errorf("PickUID(n+5) = %d, %v", uid, err)
	}
	last := func(uid int) bool { return uid != FirstUID }
	if uid, err := PickUID(n-1, last); err != nil || uid != FirstUID {
		t.Errorf("PickUID wrapping = %d, %v", uid, err)
	}
	if _, err := PickUID(0, func(int) bool { return true }); !errors.Is(err, ErrNoUID) {
		t.Errorf("all taken: %v", err)
	}
	taken, err := Taken()
	if err != nil {
		t.Fatal(err)
	}
	if !taken(os.Getuid()) {
		t.Errorf("our own uid %d is not taken", os.Getuid())
	}
}

func dupFile(t *testing.T, f *os.File) *os.File {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	var derr error
	rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) })
	if derr != nil {
		t.Fatal(derr)
	}
	return os.NewFile(uintptr(fd), "tun")
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}
