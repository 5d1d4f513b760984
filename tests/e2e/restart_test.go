package e2e

import (
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// TestRestartMidStream: a paced TCP stream runs from A to B; one side's
// daemon gets SIGTERM mid-stream. Asserted: the daemon exits, taking its
// interface and UAPI socket with it; started again and reconfigured (same
// key, port, addresses), it completes a fresh handshake, and the same TCP
// connection (kernel TCP retransmitting across the gap) completes with every
// byte intact. When the sender restarts, its retransmissions start the new
// handshake at once. When the receiver restarts, it finds the sender's
// endpoint in its state file and initiates itself (device/resume.go), and
// the sender's early new-handshake rule (device/timers/silence.go) would
// start one after 2 s of silence anyway; TCP's backed-off retransmission
// still adds to the stall, which is logged.
func TestRestartMidStream(t *testing.T) {
	requireRoot(t)
	for _, restartSender := range []bool{true, false} {
		name := "restart-receiver"
		if restartSender {
			name = "restart-sender"
		}
		t.Run(name, func(t *testing.T) {
			p := newPair(t, pairOpts{})
			p.a.ns.waitPing(p.b.tun4, 20*time.Second)
			victim, other := p.b, p.a
			if restartSender {
				victim, other = p.a, p.b
			}
			const total = 24 << 20
			source, sink := startTCP(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5001),
				helperSpec{Bytes: total, Rate: 4 << 20, Seed: 5, Timeout: 3 * time.Minute})
			eventually(t, 30*time.Second, "2 MiB of the stream arrives", func() bool {
				return sink.progress.Load() >= 2<<20
			})
			// Handshake times in wg's dump have one-second resolution and the
			// restart can fall within the same second, so count handshakes.
			handshakes := func() uint64 {
				c := other.counters()
				return c["handshakes_completed"] + c["handshake_responses_sent"]
			}
			before := handshakes()
			at := sink.progress.Load()
			terminate(t, victim)
			if sink.finished() || at >= total {
				t.Fatalf("the stream was over before the restart; nothing was tested")
			}
			victim.launch()
			victim.configure("wg", other, peerOpts{endpoint: svc(other.ns.linkAddr(p.link), other.port)})
			victim.up(0)
			t.Logf("restarted %s after %s of %s", victim.iface, fmtBytes(at), fmtBytes(total))
			restarted := time.Now()
			finishTCP(t, source, sink, total)
			t.Logf("the stream completed intact %.1f s after the restart", time.Since(restarted).Seconds())
			if hs := handshakes(); hs <= before {
				t.Errorf("%s made no new handshake with the restarted peer (%d handshakes, %d before)", other.iface, hs, before)
			}
			if c := victim.counters(); c["handshakes_completed"]+c["handshake_responses_sent"] == 0 {
				t.Errorf("the restarted daemon shows no handshake: %v", nonZero(c))
			}
		})
	}
}

// linkAddr is this namespace's end of v, in the family endpoints use.
func (ns *netns) linkAddr(v *veth) netip.Addr {
	if ns == v.a {
		return v.addrA()
	}
	return v.addrB()
}

// terminate sends SIGTERM to n's daemon and asserts that it exits and that
// its interface and UAPI socket go with it.
func terminate(t *testing.T, n *node) {
	t.Helper()
	if err := syscall.Kill(n.pid, syscall.SIGTERM); err != nil {
		t.Fatalf("kill -TERM %d: %v", n.pid, err)
	}
	eventually(t, 5*time.Second, n.iface+" daemon exits after SIGTERM", func() bool { return !processAlive(n.pid) })
	if _, err := os.Stat(n.socketPath()); err == nil {
		t.Errorf("%s still exists after the daemon exited", n.socketPath())
	}
	if _, err := n.ns.Try("ip", "link", "show", "dev", n.iface); err == nil {
		t.Errorf("interface %s still exists after the daemon exited", n.iface)
	}
	n.pid = 0
}

// TestDaemonStops: the daemon exits within 2 s, taking its UAPI socket and
// interface with it, when its interface is deleted (`ip link del`) and when
// its socket file is removed (what wg-quick down does for userspace
// implementations), for fips-go and, as the reference, wireguard-go.
func TestDaemonStops(t *testing.T) {
	requireRoot(t)
	for _, mk := range []func(testing.TB) impl{fipsGo, wireguardGo} {
		im := mk(t)
		for _, how := range []string{"ip-link-del", "socket-removed"} {
			t.Run(im.name+"/"+how, func(t *testing.T) {
				ns := newNetns(t)
				n := startNode(t, ns, im, netnstest.UniqueName("fwgD"))
				pid := n.pid
				if how == "ip-link-del" {
					ns.Run("ip", "link", "del", "dev", n.iface)
				} else if err := os.Remove(n.socketPath()); err != nil {
					t.Fatal(err)
				}
				eventually(t, 2*time.Second, im.name+" exits", func() bool { return !processAlive(pid) })
				eventually(t, 2*time.Second, "the UAPI socket goes away", func() bool {
					_, err := os.Stat(n.socketPath())
					return os.IsNotExist(err)
				})
				eventually(t, 2*time.Second, "the interface goes away", func() bool {
					_, err := ns.Try("ip", "link", "show", "dev", n.iface)
					return err != nil
				})
			})
		}
	}
}

// TestRestartWireguardGoServer: the client side alone. A stock
// wireguard-go server remembers nothing, so after its restart only the
// fips-go client's early new-handshake rule (device/timers/silence.go) can
// bring the session back before the 15 s every WireGuard waits: the
// client pings every 100 ms, the server's daemon is killed and started
// again with the same configuration (three times), and the client, its
// answers gone silent for 2 s, initiates. The longest gap between replies
// must stay under 10 s (the rule fired; without it 15 s), and is logged.
// The rule fires at most once per Keepalive-Timeout + Rekey-Timeout (15 s,
// never more often than the regular rule could), so the rounds are that
// far apart; a second restart sooner waits the regular 15 s.
func TestRestartWireguardGoServer(t *testing.T) {
	requireRoot(t)
	p := newPair(t, pairOpts{implB: wireguardGo(t), onlyAKnows: true, noV6Overlay: true})
	server, cl := p.b, p.a
	cl.ns.waitPing(server.tun4, 20*time.Second)
	for round := 1; round <= 3; round++ {
		if round > 1 {
			time.Sleep(7 * time.Second) // with restartRound's 6 s + 3 s: 16 s
		}
		before := cl.counters()["handshake_initiations_sent"]
		gap := restartRound(t, p, server, cl)
		t.Logf("round %d: longest gap between ping replies %.2f s", round, gap.Seconds())
		if gap > 10*time.Second {
			t.Errorf("round %d: replies stopped for %.1f s across the restart, want under 10 s", round, gap.Seconds())
		}
		if cl.counters()["handshake_initiations_sent"] == before {
			t.Errorf("round %d: the client started no handshake; the session came back another way", round)
		}
	}
}
