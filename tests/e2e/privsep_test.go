package e2e

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// TestPrivsepStops: a daemon whose privileges are separated cleans up
// whichever of its two processes is stopped. The worker killed with
// SIGKILL (it can remove nothing then) takes the monitor with it, and the
// monitor removes the UAPI socket file, which the worker could not
// anyway (its directory is root's); the interface goes with the last
// descriptor of the TUN. SIGTERM to the monitor stops the worker too,
// and the socket file and interface go.
func TestPrivsepStops(t *testing.T) {
	requireRoot(t)
	for _, how := range []string{"worker-killed", "monitor-terminated"} {
		t.Run(how, func(t *testing.T) {
			ns := newNetns(t)
			n := startNode(t, ns, fipsGo(t), netnstest.UniqueName("fwgK"))
			worker := n.pid
			mon, _ := strconv.Atoi(procField(t, worker, "PPid"))
			if exeW, exeM := readExe(worker), readExe(mon); exeM != exeW || procUID(mon) != 0 || procUID(worker) == 0 {
				t.Fatalf("worker %d (%s, uid %d) has parent %d (%s, uid %d), want a root fips-go monitor",
					worker, exeW, procUID(worker), mon, exeM, procUID(mon))
			}
			if how == "worker-killed" {
				syscall.Kill(worker, syscall.SIGKILL)
			} else {
				syscall.Kill(mon, syscall.SIGTERM)
			}
			eventually(t, 5*time.Second, "the worker exits", func() bool { return !processAlive(worker) })
			eventually(t, 5*time.Second, "the monitor exits", func() bool { return !processAlive(mon) })
			if _, err := os.Stat(n.socketPath()); !os.IsNotExist(err) {
				t.Errorf("%s after both exited: %v, want it gone", n.socketPath(), err)
			}
			if _, err := ns.Try("ip", "link", "show", "dev", n.iface); err == nil {
				t.Errorf("interface %s still exists after both exited", n.iface)
			}
			n.pid = 0
		})
	}
}

func readExe(pid int) string {
	exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return exe
}
