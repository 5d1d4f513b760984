package socks5

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobodyUID is the second local user of TestUDPAssociateForeignUser.
const nobodyUID = 65534

// TestUDPAssociateForeignUser is the attack of a second local user: the
// client (this process) asks for UDP ASSOCIATE with 0.0.0.0:0, and before
// it sends anything, a process of user nobody finds the relay and sends a
// datagram to it. That datagram must not reach the tunnel, and the
// client's own must still pass.
func TestUDPAssociateForeignUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a sender as a second user (uid 65534)")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash for its /dev/udp sender")
	}
	echo, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	got := make(chan string, 8)
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFrom(b)
			if err != nil {
				return
			}
			got <- string(b[:n])
			echo.WriteTo(b[:n], from)
		}
	}()
	echoAP := netip.MustParseAddrPort(echo.LocalAddr().String())
	s, addr := startServer(t, Options{})
	ctl, rep, bound := dialSOCKS(t, addr, "", "", Request{Cmd: CmdUDPAssociate, Addr: Addr{IP: netip.IPv4Unspecified()}})
	if rep != RepSucceeded {
		t.Fatalf("reply %d", rep)
	}
	defer ctl.Close()
	relay := netip.AddrPortFrom(bound.IP, bound.Port)

	// The foreign user's datagram, from a socket it keeps open meanwhile
	// (a closed one would be refused for lack of an owner, proving less).
	d, _ := AppendUDPHeader(nil, AddrFrom(echoAP))
	var esc strings.Builder
	for _, c := range append(d, "from nobody"...) {
		fmt.Fprintf(&esc, `\x%02x`, c)
	}
	sender := exec.Command(bash, "-c", `exec 3<>"/dev/udp/$1/$2" && printf "$3" >&3 && echo sent && sleep 20`,
		"sender", relay.Addr().String(), fmt.Sprint(relay.Port()), esc.String())
	sender.Dir = "/"
	sender.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID}}
	out, err := sender.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sender.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sender.Process.Kill(); sender.Wait() }()
	line := make([]byte, 5)
	if _, err := out.Read(line); err != nil || string(line) != "sent\n" {
		t.Fatalf("the foreign sender: %q, %v", line, err)
	}
	waitStats(t, s, func(st Stats) bool { return st.UDPForeign+st.UDPWrongOwner >= 1 || len(got) > 0 })
	select {
	case p := <-got:
		t.Fatalf("user nobody's datagram %q went through the client's association", p)
	default:
	}

	// The client's own datagram still passes, and its reply comes back.
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.SetDeadline(time.Now().Add(10 * time.Second))
	u.WriteTo(append(d, "from the client"...), net.UDPAddrFromAddrPort(relay))
	b := make([]byte, 2048)
	n, _, err := u.ReadFrom(b)
	if err != nil {
		t.Fatalf("the client's own datagram: %v (stats %+v)", err, s.Stats())
	}
	if _, p, err := ParseUDP(b[:n]); err != nil || string(p) != "from the client" {
		t.Fatalf("reply %q, %v", p, err)
	}
	if st := s.Stats(); st.UDPWrongOwner != 1 || st.UDPForeign != 0 {
		t.Errorf("stats %+v, want the foreign user's datagram counted as another owner's", st)
	}
}

// waitStats waits, up to a generous deadline, until ok(s.Stats()).
func waitStats(t *testing.T, s *Server, ok func(Stats) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(s.Stats()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", s.Stats())
		}
	}
}
