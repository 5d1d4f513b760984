package exit

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"
)

func pfx(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, v := range s {
		out = append(out, netip.MustParsePrefix(v))
	}
	return out
}

func TestPolicyCheck(t *testing.T) {
	host := []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	tunnel := []netip.Addr{netip.MustParseAddr("10.0.0.1")}
	base := PolicyOptions{SelfPorts: []uint16{51820}, HostAddrs: host, Tunnel: tunnel}
	for _, tc := range []struct {
		allow, deny []string
		dst         string
		want        Reason
	}{
		{dst: "198.51.100.1:80", want: reasonOK},
		{dst: "[2001:db8::1]:443", want: reasonOK},
		{dst: "127.0.0.1:80", want: ReasonLoopback},
		{dst: "[::1]:80", want: ReasonLoopback},
		{dst: "169.254.169.254:80", want: ReasonLinkLocal},
		{dst: "[fe80::1]:80", want: ReasonLinkLocal},
		{dst: "10.0.0.1:80", want: ReasonSelf},
		{dst: "192.0.2.10:51820", want: ReasonSelf},
		{dst: "192.0.2.10:22", want: ReasonHostAddr},
		{dst: "0.0.0.0:80", want: ReasonInvalid},
		{dst: "224.0.0.1:80", want: ReasonInvalid},
		{dst: "255.255.255.255:80", want: ReasonInvalid},
		{dst: "198.51.100.1:0", want: ReasonInvalid},
		// A catch-all allow does not open protected ranges; naming does.
		{allow: []string{"0.0.0.0/0"}, dst: "127.0.0.1:80", want: ReasonLoopback},
		{allow: []string{"127.0.0.1/32"}, dst: "127.0.0.1:80", want: reasonOK},
		{allow: []string{"127.0.0.0/8"}, dst: "127.0.0.2:80", want: reasonOK},
		{allow: []string{"169.254.0.0/16"}, dst: "169.254.169.254:80", want: reasonOK},
		{allow: []string{"192.0.2.10/32"}, dst: "192.0.2.10:51820", want: reasonOK},
		{allow: []string{"198.51.100.0/24"}, dst: "198.51.100.1:80", want: reasonOK},
		{allow: []string{"198.51.100.0/24"}, dst: "203.0.113.1:80", want: ReasonNotAllowed},
		{deny: []string{"198.51.100.0/24"}, dst: "198.51.100.1:80", want: ReasonDenied},
		// Deny wins over allow.
		{allow: []string{"198.51.100.0/24"}, deny: []string{"198.51.100.128/25"}, dst: "198.51.100.200:80", want: ReasonDenied},
		{allow: []string{"198.51.100.0/24"}, deny: []string{"198.51.100.128/25"}, dst: "198.51.100.1:80", want: reasonOK},
		{deny: []string{"::/0"}, dst: "[2001:db8::1]:443", want: ReasonDenied},
	} {
		o := base
		o.Allow, o.Deny = pfx(tc.allow...), pfx(tc.deny...)
		if got := NewPolicy(o).Check(netip.MustParseAddrPort(tc.dst), nil); got != tc.want {
			t.Errorf("allow %v deny %v: Check(%s) = %v, want %v", tc.allow, tc.deny, tc.dst, got, tc.want)
		}
	}
}

func TestFlowCaps(t *testing.T) {
	c := newFlowCaps(2, 3)
	for _, step := range []struct {
		peer string
		want Reason
	}{{"a", reasonOK}, {"a", reasonOK}, {"a", ReasonPeerCap}, {"b", reasonOK}, {"c", ReasonTotalCap}} {
		if got := c.acquire(step.peer); got != step.want {
			t.Fatalf("acquire(%s) = %v, want %v", step.peer, got, step.want)
		}
	}
	c.release("a")
	if got := c.acquire("c"); got != reasonOK {
		t.Fatalf("after a release: %v", got)
	}
	if got := c.acquire("a"); got != ReasonTotalCap {
		t.Fatalf("full again: %v", got)
	}
	c.release("c")
	c.release("b")
	c.release("a")
	if c.open != 0 || len(c.byPeer) != 0 {
		t.Fatalf("after releasing all: open %d, peers %v", c.open, c.byPeer)
	}
}

func TestLogLimit(t *testing.T) {
	l := logLimit{every: time.Second}
	t0 := time.Unix(1000, 0)
	if !l.allow(ReasonDenied, t0) || l.allow(ReasonDenied, t0.Add(999*time.Millisecond)) {
		t.Fatal("want one line per second per reason")
	}
	if !l.allow(ReasonLoopback, t0) {
		t.Fatal("another reason has its own budget")
	}
	if !l.allow(ReasonDenied, t0.Add(time.Second)) {
		t.Fatal("a second later the reason may log again")
	}
	if l.allow(Reason(-1), t0) || l.allow(numReasons, t0) {
		t.Fatal("out-of-range reasons never log")
	}
}

func TestRelayState(t *testing.T) {
	type ev struct {
		dir int
		e   event
	}
	for _, tc := range []struct {
		name string
		evs  []ev
		want []action
	}{
		{"both FIN", []ev{{up, evEOF}, {down, evEOF}}, []action{actCloseWrite, actClose}},
		{"half-close keeps the other way open", []ev{{down, evEOF}, {up, evEOF}}, []action{actCloseWrite, actClose}},
		{"reset after FIN", []ev{{up, evEOF}, {down, evReset}, {up, evEOF}}, []action{actCloseWrite, actAbort, actNone}},
		{"reset", []ev{{up, evReset}, {down, evReset}}, []action{actAbort, actNone}},
		{"write failure resets", []ev{{down, evWriteFail}, {up, evEOF}}, []action{actAbort, actNone}},
	} {
		var s relayState
		for i, e := range tc.evs {
			if got := s.step(e.dir, e.e); got != tc.want[i] {
				t.Errorf("%s: step %d = %v, want %v", tc.name, i, got, tc.want[i])
			}
		}
	}
}

func TestConnectReason(t *testing.T) {
	op := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", err)}
	}
	for _, tc := range []struct {
		err  error
		want Reason
	}{
		{op(syscall.ECONNREFUSED), ReasonConnRefused},
		{op(syscall.EHOSTUNREACH), ReasonUnreachable},
		{op(syscall.ENETUNREACH), ReasonUnreachable},
		{&net.OpError{Op: "dial", Err: os.ErrDeadlineExceeded}, ReasonConnTimeout},
		{errors.New("other"), ReasonConnError},
	} {
		if got := connectReason(tc.err); got != tc.want {
			t.Errorf("connectReason(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := reasonOK; r < numReasons; r++ {
		n := r.String()
		if n == "" || seen[n] {
			t.Errorf("reason %d: name %q empty or repeated", r, n)
		}
		seen[n] = true
	}
	if got := fmt.Sprint(numReasons); got != "unknown" {
		t.Errorf("out of range: %q", got)
	}
}

func TestBufferShare(t *testing.T) {
	const hi = 6 << 20
	for _, tc := range []struct{ budget, n, want int }{
		{64 << 20, 0, hi},
		{64 << 20, 1, hi},
		{64 << 20, 10, hi},      // 6.4 MiB each: the most a flow may have
		{64 << 20, 11, 4 << 20}, // 5.8 MiB rounds down to 4 MiB
		{64 << 20, 16, 4 << 20}, // exactly 4 MiB
		{64 << 20, 17, 2 << 20}, // the share changes only when n doubles
		{64 << 20, 100, 512 << 10},
		{64 << 20, 1024, 64 << 10},
		{64 << 20, 100000, minBufferShare}, // never below the floor
		{1 << 20, 1, 1 << 20},
	} {
		if got := bufferShare(tc.budget, tc.n, hi); got != tc.want {
			t.Errorf("bufferShare(%d, %d) = %d, want %d", tc.budget, tc.n, got, tc.want)
		}
	}
	// Within the floor and the ceiling the shares never exceed the budget.
	for n := 1; n <= 1024; n++ {
		if s := bufferShare(64<<20, n, hi); s*n > 64<<20 && s > minBufferShare {
			t.Fatalf("%d flows of %d bytes exceed the budget", n, s)
		}
	}
}

// TestRebalance: every TCP flow gets the current shares, and all are
// resized when a new flow halves them.
func TestRebalance(t *testing.T) {
	e := &Exit{o: Options{BufferBudget: 4 << 20, SendBufferMax: 2 << 20, ReceiveBufferMax: 4 << 20}, flows: map[*flow]struct{}{}}
	sizes := map[*flow][2]int{}
	add := func() *flow {
		f := &flow{}
		f.resize = func(s, r int) { sizes[f] = [2]int{s, r} }
		e.flows[f] = struct{}{}
		e.tcpN++
		e.rebalanceLocked(f)
		return f
	}
	a := add()
	if sizes[a] != [2]int{2 << 20, 4 << 20} {
		t.Fatalf("one flow: %v, want the maxima", sizes[a])
	}
	b := add()
	if sizes[a] != [2]int{2 << 20, 2 << 20} || sizes[b] != sizes[a] {
		t.Fatalf("two flows: %v %v, want 2 MiB each way", sizes[a], sizes[b])
	}
	udp := &flow{} // not resized
	e.flows[udp] = struct{}{}
	c := add()
	if sizes[c] != [2]int{1 << 20, 1 << 20} || sizes[a] != sizes[c] || sizes[b] != sizes[c] {
		t.Fatalf("three flows: %v %v %v, want 1 MiB each way", sizes[a], sizes[b], sizes[c])
	}
	delete(e.flows, c)
	e.tcpN--
	e.rebalanceLocked(nil)
	if sizes[a] != [2]int{2 << 20, 2 << 20} {
		t.Fatalf("back to two: %v", sizes[a])
	}
}

func TestDNSFlowEndsWithItsAnswers(t *testing.T) {
	var notDNS *dnsFlow
	if notDNS.asked() || notDNS.answered() {
		t.Fatal("a flow that is not DNS ended")
	}
	d := &dnsFlow{}
	d.asked()
	d.asked() // A and AAAA from one socket
	if d.answered() {
		t.Fatal("ended with one of two answers")
	}
	if !d.answered() {
		t.Fatal("both answered but the flow goes on")
	}
}

// TestPolicyHostState: the host's addresses, their broadcast addresses
// and the exit's ports as they are when a flow opens; cloud metadata
// services; NAT64 spellings of protected IPv4 addresses.
func TestPolicyHostState(t *testing.T) {
	h := &HostState{
		Prefixes: pfx("192.168.1.5/24", "10.200.0.1/16", "2001:db8::5/64", "127.0.0.1/8", "203.0.113.9/32"),
		Ports:    []uint16{51999},
	}
	for _, tc := range []struct {
		allow []string
		dst   string
		want  Reason
	}{
		{dst: "192.168.1.5:22", want: ReasonHostAddr},
		{dst: "10.200.0.1:22", want: ReasonHostAddr},
		{dst: "[2001:db8::5]:22", want: ReasonHostAddr},
		{dst: "[::ffff:192.168.1.5]:22", want: ReasonHostAddr},
		{dst: "192.168.1.6:22", want: reasonOK},
		{allow: []string{"0.0.0.0/0", "::/0"}, dst: "192.168.1.5:22", want: ReasonHostAddr},
		{allow: []string{"192.168.1.0/24"}, dst: "192.168.1.5:22", want: ReasonHostAddr},
		{allow: []string{"192.168.1.5/32"}, dst: "192.168.1.5:22", want: reasonOK},
		// Broadcast addresses of the host's subnets; a /32 has none.
		{dst: "192.168.1.255:53", want: ReasonInvalid},
		{dst: "10.200.255.255:53", want: ReasonInvalid},
		{allow: []string{"192.168.1.0/24"}, dst: "192.168.1.255:53", want: ReasonInvalid},
		{dst: "203.0.113.9:53", want: ReasonHostAddr},
		{dst: "0.1.2.3:80", want: ReasonInvalid},
		// A listen port the host state names (set after start) is the
		// exit's own.
		{dst: "192.168.1.5:51999", want: ReasonSelf},
		{dst: "[2001:db8::5]:51999", want: ReasonSelf},
		{dst: "127.0.0.1:51999", want: ReasonSelf},
		{dst: "192.168.1.6:51999", want: reasonOK},
		// Cloud metadata services.
		{dst: "[fd00:ec2::254]:80", want: ReasonMetadata},
		{dst: "168.63.129.16:80", want: ReasonMetadata},
		{dst: "100.100.100.200:80", want: ReasonMetadata},
		{allow: []string{"0.0.0.0/0", "::/0"}, dst: "168.63.129.16:80", want: ReasonMetadata},
		{allow: []string{"168.63.129.16/32"}, dst: "168.63.129.16:80", want: reasonOK},
		{dst: "100.100.100.201:80", want: reasonOK},
		// NAT64, well-known and local-use prefixes.
		{dst: "[64:ff9b::7f00:1]:80", want: ReasonLoopback},
		{dst: "[64:ff9b::a9fe:a9fe]:80", want: ReasonLinkLocal},
		{dst: "[64:ff9b::c0a8:105]:22", want: ReasonHostAddr},
		{dst: "[64:ff9b::c0a8:1ff]:53", want: ReasonInvalid},
		{dst: "[64:ff9b::a83f:8110]:80", want: ReasonMetadata},
		{dst: "[64:ff9b:1:7f00:0:100::]:80", want: ReasonLoopback},
		{dst: "[64:ff9b::808:808]:53", want: reasonOK},
		{allow: []string{"::/0"}, dst: "[64:ff9b::7f00:1]:80", want: ReasonLoopback},
		{allow: []string{"64:ff9b::/96"}, dst: "[64:ff9b::808:808]:53", want: reasonOK},
		{allow: []string{"127.0.0.1/32"}, dst: "[64:ff9b::7f00:1]:80", want: reasonOK},
	} {
		p := NewPolicy(PolicyOptions{Allow: pfx(tc.allow...)})
		if got := p.Check(netip.MustParseAddrPort(tc.dst), h); got != tc.want {
			t.Errorf("allow %v: Check(%s) = %v, want %v", tc.allow, tc.dst, got, tc.want)
		}
	}
	p := NewPolicy(PolicyOptions{Deny: pfx("203.0.113.0/24")})
	if got := p.Check(netip.MustParseAddrPort("[64:ff9b::cb00:7101]:80"), nil); got != ReasonDenied {
		t.Errorf("a NAT64 spelling of a denied address: %v", got)
	}
	for _, a := range []string{"192.168.1.5", "64:ff9b::c0a8:105", "192.168.1.255"} {
		if got := p.CheckPing(netip.MustParseAddr(a), h); got == reasonOK {
			t.Errorf("ping %s allowed", a)
		}
	}
}

// TestHostView: the host is read again once a reading is older than its
// interval, and not before.
func TestHostView(t *testing.T) {
	reads := 0
	v := hostView{read: func() HostState { reads++; return HostState{Ports: []uint16{uint16(reads)}} }, every: time.Second}
	t0 := time.Unix(1000, 0)
	for _, step := range []struct {
		at   time.Duration
		want uint16
	}{{0, 1}, {999 * time.Millisecond, 1}, {time.Second, 2}, {1500 * time.Millisecond, 2}, {-time.Second, 3}} {
		if got := v.get(t0.Add(step.at)).Ports[0]; got != step.want {
			t.Errorf("at %v: reading %d, want %d", step.at, got, step.want)
		}
	}
}
