//go:build unix

// Package netnstest is what the root-only tests share to work in network
// namespaces of their own: unique names, namespaces that take every
// process inside them down with the test, and the skip-or-fail rule of
// FIPS_E2E=1.
package netnstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// SkipOrFail skips the test for the given reason, unless FIPS_E2E=1
// demands that the end-to-end tests run, in which case the missing piece
// is a failure.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if os.Getenv("FIPS_E2E") == "1" {
		t.Fatalf("FIPS_E2E=1 but %s", reason)
	}
	t.Skip(reason)
}

var nameSeq atomic.Int32

// UniqueName returns a name of at most 15 bytes (the limit for interface
// names) that no other test in this process, and most likely no concurrent
// run, uses: /var/run/wireguard is shared by every namespace, so interface
// names must be unique machine-wide. Keep prefix to 6 bytes.
func UniqueName(prefix string) string {
	for {
		n := fmt.Sprintf("%s%03x%d", prefix, os.Getpid()&0xfff, nameSeq.Add(1))
		if _, err := os.Stat("/var/run/wireguard/" + n + ".sock"); err != nil {
			return n
		}
	}
}

// NS is a network namespace the test created; it belongs to that test and
// is deleted, with every process still inside it, when the test ends.
type NS struct {
	T    testing.TB // the test it belongs to
	Name string
}

// New creates a namespace named after prefix, with its loopback up.
func New(t testing.TB, prefix string) *NS {
	t.Helper()
	ns := &NS{T: t, Name: UniqueName(prefix)}
	if out, err := exec.Command("ip", "netns", "add", ns.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", ns.Name, err, out)
	}
	t.Cleanup(ns.destroy)
	ns.Run("ip", "link", "set", "lo", "up")
	return ns
}

// destroy ends every process left in the namespace (all of them were
// started by this test), then deletes it.
func (ns *NS) destroy() {
	deadline := time.Now().Add(5 * time.Second)
	sig := syscall.SIGTERM
	for {
		pids := ns.Pids()
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			sig = syscall.SIGKILL
		}
		for _, p := range pids {
			syscall.Kill(p, sig)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
		ns.T.Errorf("ip netns del %s: %v\n%s", ns.Name, err, out)
	}
}

// Pids are the processes running in the namespace.
func (ns *NS) Pids() []int {
	out, err := exec.Command("ip", "netns", "pids", ns.Name).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// Command returns a command that runs inside the namespace.
func (ns *NS) Command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name}, args...)...)
}

// Try runs a command inside the namespace (for at most 2 minutes) and
// returns its combined output.
func (ns *NS) Try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := ns.Command(ctx, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %v: %w\n%s", ns.Name, args, err, out)
	}
	return string(out), nil
}

// Run is Try, failing the test on error.
func (ns *NS) Run(args ...string) string {
	ns.T.Helper()
	out, err := ns.Try(args...)
	if err != nil {
		ns.T.Fatal(err)
	}
	return out
}
