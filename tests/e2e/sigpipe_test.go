package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/netnstest"
)

// TestDaemonOutlivesItsLogReader starts the daemon as wg-quick does
// (daemonizing, verbose), with its output into a pipe, then closes the
// pipe's reading end (a log collector that restarts, `fips-go wg0 | logger`
// ending) and makes the daemon log. A Go program that writes to a broken
// pipe on its standard output or error dies of SIGPIPE unless it handles
// the signal; the daemon must lose the log line, not the tunnel.
func TestDaemonOutlivesItsLogReader(t *testing.T) {
	requireRoot(t)
	im := fipsGo(t)
	ns := newNetns(t)
	iface := netnstest.UniqueName("fwgP")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name, "env", "LOG_LEVEL=verbose", im.bin, iface)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// The parent exits once the daemon answers; its start-up lines are in
	// the pipe by then.
	if err := cmd.Wait(); err != nil {
		r.Close()
		t.Fatalf("fips-go %s: %v", iface, err)
	}
	n := &node{t: t, ns: ns, impl: im, iface: iface}
	t.Cleanup(n.stop)
	n.pid = findDaemon(im.bin, iface)
	if n.pid == 0 {
		r.Close()
		t.Fatal("no daemon running")
	}
	if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
		t.Fatalf("reading the daemon's first line: %v", err)
	}
	r.Close()
	// Each of these logs a line at verbose level.
	key, peer := newKeyPair(t), newKeyPair(t)
	ns.Run("wg", "set", iface, "private-key", key.privFile, "listen-port", "51999")
	ns.Run("wg", "set", iface, "peer", peer.pub, "allowed-ips", "10.66.0.2/32", "endpoint", "127.0.0.1:51998")
	ns.Run("ip", "link", "set", iface, "up")
	ns.Run("ip", "addr", "add", "10.66.0.1/24", "dev", iface)
	ns.Try("ping", "-c", "1", "-W", "1", "10.66.0.2") // a handshake attempt, logged
	time.Sleep(200 * time.Millisecond)
	if !processAlive(n.pid) {
		t.Fatal("the daemon died when its log reader went away")
	}
	if err := uapiGet(n.socketPath()); err != nil {
		t.Fatalf("the daemon's UAPI socket: %v", err)
	}
}
