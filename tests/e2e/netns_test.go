package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// netns is a network namespace the test created (see netnstest.NS).
type netns struct{ *netnstest.NS }

func newNetns(t testing.TB) *netns { return &netns{netnstest.New(t, "fe2e")} }

// sysctl writes one /proc/sys value inside the namespace; key uses dots.
func (ns *netns) sysctl(key, value string) {
	ns.T.Helper()
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	ns.Run("sh", "-c", fmt.Sprintf("echo %s > %s", value, path))
}

// veth is one veth pair between two namespaces, with an IPv4 /24 and an
// IPv6 /64 on each end (IPv6 without duplicate address detection, so the
// addresses are usable at once).
type veth struct {
	a, b       *netns
	ifA, ifB   string
	v4A, v4B   netip.Addr
	v6A, v6B   netip.Addr
	underlayV6 bool   // which family endpoints should use
	farIf      string // routedLink: the router's interface towards b
}

// connect joins a and b with a veth pair on subnet 10.N.0.0/24 and
// fd00:N::/64 (N = subnet), ends .1 and .2, with the given MTU (0: 1500).
func connect(t testing.TB, a, b *netns, subnet, mtu int) *veth {
	t.Helper()
	v := &veth{a: a, b: b, ifA: netnstest.UniqueName("va"), ifB: netnstest.UniqueName("vb")}
	v.v4A = netip.MustParseAddr(fmt.Sprintf("10.%d.0.1", subnet))
	v.v4B = netip.MustParseAddr(fmt.Sprintf("10.%d.0.2", subnet))
	v.v6A = netip.MustParseAddr(fmt.Sprintf("fd00:%d::1", subnet))
	v.v6B = netip.MustParseAddr(fmt.Sprintf("fd00:%d::2", subnet))
	out, err := exec.Command("ip", "link", "add", v.ifA, "netns", a.Name, "type", "veth",
		"peer", "name", v.ifB, "netns", b.Name).CombinedOutput()
	if err != nil {
		t.Fatalf("creating veth: %v\n%s", err, out)
	}
	for _, end := range []struct {
		ns     *netns
		dev    string
		v4, v6 netip.Addr
	}{{a, v.ifA, v.v4A, v.v6A}, {b, v.ifB, v.v4B, v.v6B}} {
		if mtu > 0 {
			end.ns.Run("ip", "link", "set", "dev", end.dev, "mtu", strconv.Itoa(mtu))
		}
		end.ns.Run("ip", "addr", "add", end.v4.String()+"/24", "dev", end.dev)
		end.ns.Run("ip", "addr", "add", end.v6.String()+"/64", "dev", end.dev, "nodad")
		end.ns.Run("ip", "link", "set", "dev", end.dev, "up")
	}
	return v
}

// addrB is b's underlay address in the family the endpoints use.
func (v *veth) addrB() netip.Addr {
	if v.underlayV6 {
		return v.v6B
	}
	return v.v4B
}

func (v *veth) addrA() netip.Addr {
	if v.underlayV6 {
		return v.v6A
	}
	return v.v4A
}

// pingResult is what ping(8) reports.
type pingResult struct {
	sent, received int
	out            string
}

// ping runs `ping -c count -s size` (with -M do when df) and parses the
// summary line; it does not fail the test when replies are missing.
func (ns *netns) ping(dst netip.Addr, count, size int, df bool, extra ...string) pingResult {
	ns.T.Helper()
	args := []string{"ping", "-n", "-c", strconv.Itoa(count), "-s", strconv.Itoa(size), "-W", "2"}
	if df {
		args = append(args, "-M", "do")
	}
	args = append(args, extra...)
	args = append(args, dst.String())
	out, _ := ns.Try(args...)
	r := pingResult{out: out}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "packets transmitted") {
			fmt.Sscanf(strings.TrimSpace(line), "%d packets transmitted, %d received", &r.sent, &r.received)
		}
	}
	return r
}

// waitPing pings dst once a second until a reply comes back, failing the
// test after a generous deadline. The first packets start the handshake.
func (ns *netns) waitPing(dst netip.Addr, deadline time.Duration) {
	ns.T.Helper()
	end := time.Now().Add(deadline)
	var last pingResult
	for time.Now().Before(end) {
		last = ns.ping(dst, 1, 56, false, "-W", "1")
		if last.received == 1 {
			return
		}
	}
	ns.T.Fatalf("%s: no reply from %s within %v; last ping:\n%s", ns.Name, dst, deadline, last.out)
}

// eventually polls cond every 100 ms until it holds or the generous
// deadline passes, then fails the test with what.
func eventually(t testing.TB, deadline time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", deadline, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
