package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Helper modes of TestRootlessSOCKS5UDPOwner: a SOCKS5 UDP client that
// logs in, and a local attacker that sends to its relay. Both take
// commands on stdin.

// socksUDPHeader is the SOCKS5 UDP request header for an IPv4 target.
func socksUDPHeader(target string) ([]byte, error) {
	ap, err := netip.ParseAddrPort(target)
	if err != nil || !ap.Addr().Is4() {
		return nil, fmt.Errorf("target %q: want IPv4:port", target)
	}
	a := ap.Addr().As4()
	return []byte{0, 0, 0, 1, a[0], a[1], a[2], a[3], byte(ap.Port() >> 8), byte(ap.Port())}, nil
}

// socksUDPClient (helper mode "socks-udp-client") logs in to the SOCKS5
// proxy at s.Addr with s.Auth, asks for a UDP association (for 0.0.0.0:0,
// or for its own socket's address when s.NamePort), prints "relay ADDR"
// and "local ADDR", then for each "send MSG" on stdin sends MSG through
// the relay to s.Target until its echo comes back ("echoed MSG") or ten
// tries fail ("lost MSG"). At the end of stdin the result counts the
// round trips (Datagrams) and every datagram that was not an echo of its
// own (Corrupt).
func socksUDPClient(s helperSpec, out *printer) (helperResult, error) {
	var res helperResult
	hdr, err := socksUDPHeader(s.Target)
	if err != nil {
		return res, err
	}
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return res, err
	}
	defer u.Close()
	c, err := net.DialTimeout("tcp", s.Addr, 10*time.Second)
	if err != nil {
		return res, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	user, pass, _ := strings.Cut(s.Auth, ":")
	c.Write([]byte{5, 1, 2}) // username/password only
	var b [2]byte
	if _, err := io.ReadFull(c, b[:]); err != nil || b != [2]byte{5, 2} {
		return res, fmt.Errorf("greeting: % x %v", b, err)
	}
	login := append([]byte{1, byte(len(user))}, user...)
	login = append(append(login, byte(len(pass))), pass...)
	c.Write(login)
	if _, err := io.ReadFull(c, b[:]); err != nil || b != [2]byte{1, 0} {
		return res, fmt.Errorf("login: % x %v", b, err)
	}
	want := netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	if s.NamePort {
		want = u.LocalAddr().(*net.UDPAddr).AddrPort()
	}
	a := want.Addr().As4()
	c.Write([]byte{5, 3, 0, 1, a[0], a[1], a[2], a[3], byte(want.Port() >> 8), byte(want.Port())})
	var h [10]byte // an IPv4 reply
	if _, err := io.ReadFull(c, h[:]); err != nil || h[1] != 0 || h[3] != 1 {
		return res, fmt.Errorf("UDP ASSOCIATE: % x %v", h, err)
	}
	c.SetDeadline(time.Time{})
	relay := netip.AddrPortFrom(netip.AddrFrom4([4]byte(h[4:8])), uint16(h[8])<<8|uint16(h[9]))
	out.line("relay %v", relay)
	out.line("local %v", u.LocalAddr())

	sent := map[string]bool{}
	buf := make([]byte, 65535)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		msg, ok := strings.CutPrefix(sc.Text(), "send ")
		if !ok {
			continue
		}
		sent[msg] = true
		echoed := false
		for try := 0; try < 10 && !echoed; try++ {
			if _, err := u.WriteToUDPAddrPort(append(append([]byte(nil), hdr...), msg...), relay); err != nil {
				return res, err
			}
			for deadline := time.Now().Add(time.Second); ; {
				u.SetReadDeadline(deadline)
				n, _, err := u.ReadFromUDPAddrPort(buf)
				if err != nil {
					break
				}
				d := buf[:n]
				switch {
				case !bytes.HasPrefix(d, hdr) || !sent[string(d[len(hdr):])]:
					res.Corrupt++
					out.line("foreign %q", d)
				case string(d[len(hdr):]) == msg:
					echoed = true
				}
				if echoed {
					break
				}
			}
		}
		if echoed {
			res.Datagrams++
			out.line("echoed %s", msg)
		} else {
			out.line("lost %s", msg)
		}
	}
	return res, nil
}

// socksUDPAttacker (helper mode "socks-udp-attacker") prints "local ADDR"
// of its UDP socket, and for each "send" on stdin sends three SOCKS5 UDP
// datagrams for s.Target to the relay at s.Addr and prints "sent". It
// reads its socket all along; at the end of stdin the result counts what
// it received (Datagrams).
func socksUDPAttacker(s helperSpec, out *printer) (helperResult, error) {
	var res helperResult
	hdr, err := socksUDPHeader(s.Target)
	if err != nil {
		return res, err
	}
	relay, err := netip.ParseAddrPort(s.Addr)
	if err != nil {
		return res, err
	}
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return res, err
	}
	out.line("local %v", u.LocalAddr())
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 65535)
		for {
			n, from, err := u.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			got.Add(1)
			out.line("received %q from %v", b[:n], from)
		}
	}()
	round := 0
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() != "send" {
			continue
		}
		round++
		for i := range 3 {
			d := fmt.Appendf(append([]byte(nil), hdr...), "attacker uid %d round %d #%d", os.Getuid(), round, i)
			if _, err := u.WriteToUDPAddrPort(d, relay); err != nil {
				u.Close()
				return res, fmt.Errorf("sending to the relay: %w", err)
			}
		}
		out.line("sent")
	}
	u.Close()
	<-done
	res.Datagrams = int(got.Load())
	return res, nil
}
