package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The SOCKS5 UDP association, owned by its client, end to end (issue 34):
// fips-go serves SOCKS5 with a login as user nobody; a client of another
// unprivileged user logs in and opens a UDP association; processes of
// two more users (one unrelated, one the proxy's own user) find the relay
// and send to it before the client sends anything. None of their
// datagrams may reach the tunnel or bring anything back, and the client's
// own must still round-trip.

const (
	socksClientUID   = 65533 // the legitimate client (no passwd entry needed)
	socksAttackerUID = 65532 // an unrelated local user
	socksSinkPort    = 9     // the recording UDP echo on rlPeerTun
	socksAuth        = "alice:correct horse battery staple"
	socksMetrics     = "127.0.0.1:9586" // in the client's namespace
)

// TestRootlessSOCKS5UDPOwner: with --socks5-auth-file, a second local
// user cannot send a single datagram through another client's UDP
// association, whether the client asked for 0.0.0.0:0 (the owner check
// decides) or named its port (the exact address decides).
func TestRootlessSOCKS5UDPOwner(t *testing.T) {
	e := newRootlessEnv(t)
	auth := filepath.Join(e.dir, "socks5.auth")
	if err := os.WriteFile(auth, []byte(socksAuth+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Private to the user running fips-go, as --socks5-auth-file demands.
	if err := os.Chown(auth, nobodyID, nobodyID); err != nil {
		t.Fatal(err)
	}
	p := e.startNetstack(1, "--socks5", "127.0.0.1:0", "--socks5-auth-file", auth, "--metrics", socksMetrics)
	defer func() {
		if t.Failed() {
			t.Logf("userspace output:\n%s", p.output())
		}
	}()
	sink := e.recordingEcho(t, netip.AddrPortFrom(netip.MustParseAddr(rlPeerTun), socksSinkPort))

	for _, tc := range []struct {
		name     string
		namePort bool
	}{
		{"any-port", false},  // UDP ASSOCIATE 0.0.0.0:0: the owner check alone protects it
		{"named-port", true}, // UDP ASSOCIATE 127.0.0.1:P: held to that exact address
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := e.startAs(t, socksClientUID, helperSpec{Mode: "socks-udp-client", Addr: p.listen["socks5"],
				Target: sink.addr.String(), Auth: socksAuth, NamePort: tc.namePort})
			relay := client.expect(t, "relay ")
			t.Logf("client uid %d, UDP socket %s, relay %s", socksClientUID, client.expect(t, "local "), relay)

			// The attackers: every process of a user that is not the
			// client's, the proxy's own user included. Each sends from a
			// socket it keeps open (a closed one would be refused for
			// lack of an owner, proving less) before the client has sent
			// anything, and reads whatever comes back.
			var attackers []*lineProc
			for _, uid := range []uint32{socksAttackerUID, nobodyID} {
				a := e.startAs(t, uid, helperSpec{Mode: "socks-udp-attacker", Addr: relay, Target: sink.addr.String()})
				t.Logf("attacker uid %d, UDP socket %s", uid, a.expect(t, "local "))
				attackers = append(attackers, a)
			}
			// An attacker's datagrams are in the relay's receive queue
			// before the client's (loopback delivers on send), so when
			// the client's echo comes back the relay has judged theirs.
			for _, a := range attackers {
				a.say(t, "send")
				a.expect(t, "sent")
			}
			client.say(t, "send first")
			if got := client.expect(t, "echoed ", "lost "); got != "first" {
				t.Errorf("the client's first datagram: %s", got)
			}
			// Once the client is known, they try again.
			for _, a := range attackers {
				a.say(t, "send")
				a.expect(t, "sent")
			}
			client.say(t, "send second")
			if got := client.expect(t, "echoed ", "lost "); got != "second" {
				t.Errorf("the client's second datagram: %s", got)
			}
			// No wait for stragglers: the relay judged every attacker's
			// datagram before the client's, and the echo records what it
			// receives before it answers, so anything relayed is already
			// recorded, and a datagram for an attacker comes back only if
			// it took the association over (then the client's are lost).

			for i, a := range attackers {
				res := a.finish(t)
				if res.Err != "" {
					t.Errorf("attacker %d: %s (the attack was not made)", i, res.Err)
				}
				if res.Datagrams != 0 {
					t.Errorf("attacker %d received %d datagrams through the client's association:\n%s", i, res.Datagrams, a.log.String())
				}
			}
			res := client.finish(t)
			if res.Err != "" || res.Datagrams != 2 || res.Corrupt != 0 {
				t.Errorf("client: %+v, want 2 round trips and nothing foreign:\n%s", res, client.log.String())
			}
			got := sink.payloads()
			for _, pl := range got {
				if strings.Contains(pl, "attacker") {
					t.Errorf("an attacker's datagram reached the tunnel: %q", pl)
				}
			}
			for _, want := range []string{"first", "second"} {
				if !contains(got, want) {
					t.Errorf("the client's %q never reached the tunnel (the echo saw %q)", want, got)
				}
			}
			sink.reset()
		})
	}
	// What was dropped shows, by reason: before the client's first
	// datagram with 0.0.0.0:0 the owner check turns both attackers away,
	// after it (and from the start with a named port) the address does.
	m := scrapeIn(t, e.client, socksMetrics)
	for reason, least := range map[string]int{"udp_wrong_owner": 2, "udp_foreign": 2} {
		re := regexp.MustCompile(`(?m)^fipsgo_socks5_dropped_total\{[^}]*reason="` + reason + `"\} (\d+)$`)
		got := re.FindStringSubmatch(m)
		if got == nil {
			t.Errorf("metrics lack fipsgo_socks5_dropped_total for %s:\n%s", reason, m)
			continue
		}
		if n, _ := strconv.Atoi(got[1]); n < least {
			t.Errorf("fipsgo_socks5_dropped_total{reason=%q} = %d, want at least %d", reason, n, least)
		}
	}
}

// udpRecorder is a UDP echo in the peer's namespace that remembers every
// payload it received.
type udpRecorder struct {
	addr netip.AddrPort
	mu   sync.Mutex
	got  []string
}

func (r *udpRecorder) payloads() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func (r *udpRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = nil
}

func (e *rootlessEnv) recordingEcho(t *testing.T, at netip.AddrPort) *udpRecorder {
	t.Helper()
	var pc *net.UDPConn
	var err error
	inNetns(t, e.peer.ns, func() { pc, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(at)) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	r := &udpRecorder{addr: at}
	go func() {
		b := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			r.mu.Lock()
			if len(r.got) < 1024 {
				r.got = append(r.got, string(b[:n]))
			}
			r.mu.Unlock()
			pc.WriteToUDPAddrPort(b[:n], from)
		}
	}()
	return r
}

// lineProc is a helper the test talks to by lines: commands on its stdin,
// reports on its stdout.
type lineProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // closed when stdout ends
	log    syncBuffer  // every stdout line
	stderr syncBuffer
}

// startAs runs the helper as uid (its own group, no supplementary groups)
// in the client namespace.
func (e *rootlessEnv) startAs(t *testing.T, uid uint32, s helperSpec) *lineProc {
	t.Helper()
	spec, _ := json.Marshal(s)
	p := &lineProc{lines: make(chan string, 64)}
	p.cmd = exec.Command(e.helper)
	p.cmd.Dir = e.dir
	p.cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + e.dir, helperEnv + "=" + string(spec)}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	inNetns(t, e.client, func() { err = p.cmd.Start() })
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.log.Write([]byte(sc.Text() + "\n"))
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		go func() {
			for range p.lines {
			}
		}()
		<-done
		p.cmd.Wait()
	})
	return p
}

// expect waits for the next line that starts with one of prefixes and
// returns it without the prefix; "lost X" comes back as "lost X".
func (p *lineProc) expect(t *testing.T, prefixes ...string) string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("helper exited while waiting for %q:\n%s%s", prefixes, p.log.String(), p.stderr.String())
			}
			for i, pre := range prefixes {
				if rest, ok := strings.CutPrefix(l, pre); ok {
					if i == 0 {
						return rest
					}
					return l
				}
			}
		case <-timeout:
			t.Fatalf("no %q from the helper in a minute:\n%s%s", prefixes, p.log.String(), p.stderr.String())
		}
	}
}

func (p *lineProc) say(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatalf("telling the helper %q: %v", line, err)
	}
}

// finish closes the helper's stdin and returns its result.
func (p *lineProc) finish(t *testing.T) helperResult {
	t.Helper()
	p.stdin.Close()
	var res helperResult
	if err := json.Unmarshal([]byte(p.expect(t, "result ")), &res); err != nil {
		t.Fatalf("helper result: %v", err)
	}
	return res
}
