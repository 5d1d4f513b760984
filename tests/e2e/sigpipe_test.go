package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"testing"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
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
	// A peer with the interface's own public key is ignored with a log
	// line at every level, written before the UAPI answers: a daemon that
	// dies of SIGPIPE dies before wg hears back. (Configuring a peer,
	// bringing the link up and a handshake attempt log nothing once the
	// daemon has started, so they could not catch it.)
	key := newKeyPair(t)
	ns.Run("wg", "set", iface, "private-key", key.privFile)
	if out, err := ns.Try("wg", "set", iface, "peer", key.pub); err != nil || !processAlive(n.pid) {
		t.Fatalf("the daemon died when its log reader went away (wg set: %v %s)", err, out)
	}
	if err := uapiGet(n.socketPath()); err != nil {
		t.Fatalf("the daemon's UAPI socket: %v", err)
	}
}
