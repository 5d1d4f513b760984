package tun_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/packet"
	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/memtun"
	"golang.org/x/sys/unix"
)

// requireRoot skips a test that needs root and /dev/net/tun, unless
// FIPS_E2E=1 demands that it runs, in which case it fails.
func requireRoot(t *testing.T) {
	t.Helper()
	reason := ""
	if os.Geteuid() != 0 {
		reason = "needs root to create a TUN device"
	} else if _, err := os.Stat("/dev/net/tun"); err != nil {
		reason = "needs /dev/net/tun: " + err.Error()
	} else if _, err := exec.LookPath("ip"); err != nil {
		reason = "needs the ip command (iproute2)"
	}
	if reason == "" {
		return
	}
	if os.Getenv("FIPS_E2E") == "1" {
		t.Fatalf("FIPS_E2E=1 but %s", reason)
	}
	t.Skip(reason)
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

// upTUN creates TUN name with MTU 1420, closed when the test ends, and
// brings it up as local in 198.18.sub.0/24, a benchmarking-range subnet
// (RFC 2544) that nothing else on a development machine routes; peer is
// another address there, reached through the TUN.
func upTUN(t *testing.T, name string, sub int) (dev tun.Device, local, peer netip.Addr) {
	t.Helper()
	dev, err := tun.Create(name, 1420)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	local = netip.MustParseAddr(fmt.Sprintf("198.18.%d.1", sub))
	peer = netip.MustParseAddr(fmt.Sprintf("198.18.%d.2", sub))
	run(t, "ip", "addr", "add", local.String()+"/24", "dev", name)
	run(t, "ip", "link", "set", name, "up")
	return dev, local, peer
}

// reader copies every packet the device returns into a channel, so the test
// can wait for a particular one with a timeout; it stops when Read fails
// (the device was closed).
func reader(dev tun.Device) <-chan []byte {
	ch := make(chan []byte, 256)
	go func() {
		defer close(ch)
		n := dev.BatchSize()
		bufs := make([][]byte, n)
		sizes := make([]int, n)
		for i := range bufs {
			bufs[i] = make([]byte, tun.Headroom+65535)
		}
		for {
			k, err := dev.Read(bufs, sizes, tun.Headroom)
			if err != nil {
				return
			}
			for i := range k {
				select {
				case ch <- append([]byte(nil), bufs[i][tun.Headroom:tun.Headroom+sizes[i]]...):
				default: // the test is not interested in a flood
				}
			}
		}
	}()
	return ch
}

// await returns the first packet from ch that match accepts.
func await(t *testing.T, ch <-chan []byte, what string, match func(packet.Info) bool) packet.Info {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case p, ok := <-ch:
			if !ok {
				t.Fatalf("device closed while waiting for %s", what)
			}
			in, err := packet.Parse(p)
			if err == nil && match(in) {
				if err := memtun.VerifyPacket(p); err != nil {
					t.Fatalf("%s from the kernel: %v", what, err)
				}
				return in
			}
		case <-timeout:
			t.Fatalf("no %s within 10s", what)
		}
	}
}

func writePacket(t *testing.T, dev tun.Device, pkt []byte) {
	t.Helper()
	buf := append(make([]byte, tun.Headroom), pkt...)
	if n, err := dev.Write([][]byte{buf}, tun.Headroom); err != nil || n != 1 {
		t.Fatalf("Write = %d, %v", n, err)
	}
}

// TestKernelTUN creates a real TUN, gives it an address and checks both
// directions: the kernel's ping and UDP reach Read, and the echo reply and
// UDP datagram we Write reach the kernel's sockets.
func TestKernelTUN(t *testing.T) {
	requireRoot(t)
	name := fmt.Sprintf("fipst%d", os.Getpid()%100000)
	dev, local, peer := upTUN(t, name, os.Getpid()%256)
	if got, err := dev.Name(); err != nil || got != name {
		t.Fatalf("Name = %q, %v; want %q", got, err, name)
	}
	if mtu, err := dev.MTU(); err != nil || mtu != 1420 {
		t.Fatalf("MTU = %d, %v; want 1420", mtu, err)
	}
	if bs := dev.BatchSize(); bs < 2 {
		t.Fatalf("BatchSize = %d: offloads (IFF_VNET_HDR) are not on", bs)
	}
	pkts := reader(dev)

	// ping: the kernel's echo request reaches Read, our reply reaches ping.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ping := exec.CommandContext(ctx, "ping", "-n", "-c", "1", "-W", "10", peer.String())
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	req := await(t, pkts, "ICMP echo request", func(in packet.Info) bool {
		return in.Proto == packet.ProtoICMPv4 && in.ICMPType == 8 && in.Dst == peer
	})
	writePacket(t, dev, memtun.BuildICMPv4Echo(peer, local, true, req.EchoID, req.EchoSeq, req.Payload))
	if err := ping.Wait(); err != nil {
		t.Fatalf("ping did not get our echo reply: %v", err)
	}

	// UDP both ways through a kernel socket on the TUN's address.
	sock, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	sockAddr := sock.LocalAddr().(*net.UDPAddr).AddrPort()
	peerAP := netip.AddrPortFrom(peer, 9999)
	if _, err := sock.WriteToUDPAddrPort([]byte("to the tunnel"), peerAP); err != nil {
		t.Fatal(err)
	}
	got := await(t, pkts, "UDP datagram", func(in packet.Info) bool {
		return in.Proto == packet.ProtoUDP && in.Dst == peer && in.DstPort == 9999
	})
	if string(got.Payload) != "to the tunnel" || got.SrcPort != sockAddr.Port() {
		t.Fatalf("UDP from kernel: %+v", got)
	}
	writePacket(t, dev, memtun.BuildUDPv4(peerAP, sockAddr, []byte("from the tunnel")))
	_ = sock.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 100)
	n, from, err := sock.ReadFromUDPAddrPort(buf)
	if err != nil || !bytes.Equal(buf[:n], []byte("from the tunnel")) || from != peerAP {
		t.Fatalf("kernel socket got %q from %v, %v", buf[:n], from, err)
	}

	// Close removes the (non-persistent) interface.
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	for range pkts {
	}
	if out, err := exec.Command("ip", "link", "show", name).CombinedOutput(); err == nil {
		t.Fatalf("interface still exists after Close:\n%s", out)
	}
}

func TestCreateValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		mtu  int
	}{{"", 1420}, {"a/b", 1420}, {"waytoolonginterfacename", 1420}, {"ok0", 10}, {"ok0", 70000}} {
		if dev, err := tun.Create(tc.name, tc.mtu); err == nil {
			dev.Close()
			t.Errorf("Create(%q, %d) accepted", tc.name, tc.mtu)
		}
	}
	if _, err := tun.CreateFromFile(nil, 1420); err == nil {
		t.Error("CreateFromFile(nil) accepted")
	}
}

// TestKernelTUNFromFile opens a TUN the way the daemonizing parent does and
// hands the file to CreateFromFile, as the re-executed child does with fd 3.
func TestKernelTUNFromFile(t *testing.T) {
	requireRoot(t)
	name := fmt.Sprintf("fipsf%d", os.Getpid()%100000)
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		t.Fatal(err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "/dev/net/tun")
	dev, err := tun.CreateFromFile(f, 1380)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	defer dev.Close()
	if got, _ := dev.Name(); got != name {
		t.Fatalf("Name = %q, want %q", got, name)
	}
	out, err := exec.Command("ip", "link", "show", name).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("mtu 1380")) {
		t.Fatalf("ip link show %s: %v\n%s", name, err, out)
	}
	if dev.File() == nil {
		t.Fatal("File() is nil for a kernel TUN")
	}
}

// TestKernelTUNCoalescedWrites writes batches that our write path joins
// into super-packets (TCP, and UDP where the kernel has USO) and checks the
// kernel's sockets get exactly the bytes: the virtio-net headers, lengths
// and partial checksums are what the kernel expects, and singles with the
// data-valid flag are accepted.
func TestKernelTUNCoalescedWrites(t *testing.T) {
	requireRoot(t)
	dev, local, peer := upTUN(t, fmt.Sprintf("fipsg%d", os.Getpid()%100000), (os.Getpid()+1)%256)
	pkts := reader(dev)
	batch := func(ps ...[]byte) {
		t.Helper()
		bufs := make([][]byte, len(ps))
		for i, p := range ps {
			bufs[i] = append(make([]byte, tun.Headroom), p...)
		}
		if n, err := dev.Write(bufs, tun.Headroom); err != nil || n != len(ps) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}

	// UDP: 40 equal datagrams and a short one in one batch.
	sock, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	to := sock.LocalAddr().(*net.UDPAddr).AddrPort()
	from := netip.AddrPortFrom(peer, 7000)
	var ps [][]byte
	for i := range 41 {
		size := 1000
		if i == 40 {
			size = 10
		}
		ps = append(ps, memtun.BuildUDPv4(from, to, bytes.Repeat([]byte{byte(i)}, size)))
	}
	batch(ps...)
	if w, n := tun.WriteCounts(dev); n != 41 || w > 2 {
		// 2: one super-packet with the short datagram at its end, or,
		// without USO (Linux before 6.2), none.
		if w != 41 {
			t.Fatalf("41 datagrams took %d writes", w)
		}
		t.Log("the kernel has no USO: UDP was written packet by packet")
	}
	_ = sock.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 2000)
	for i := range 41 {
		n, src, err := sock.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		want := ps[i][28:]
		if src != from || !bytes.Equal(buf[:n], want) {
			t.Fatalf("datagram %d: %d bytes from %v, want %d bytes from %v", i, n, src, len(want), from)
		}
	}

	// TCP: a handshake by hand, then 160 segments in batches of 40, each
	// sent when the one before was read (no window scaling here).
	ln, err := net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := ln.Addr().(*net.TCPAddr).AddrPort()
	cli := netip.AddrPortFrom(peer, 40000)
	seg := func(seq, ack uint32, flags uint8, payload []byte) []byte {
		p, err := packet.TCP(packet.TCPSegment{Src: cli, Dst: srv, Seq: seq, Ack: ack, Flags: flags, Window: 65535, Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	batch(seg(100, 0, packet.TCPSyn, nil))
	synack := await(t, pkts, "SYN-ACK", func(in packet.Info) bool {
		return in.Proto == packet.ProtoTCP && in.DstPort == cli.Port() && in.Flags&packet.TCPSyn != 0
	})
	ack := synack.Seq + 1
	batch(seg(101, ack, packet.TCPAck, nil))
	c, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sent []byte
	seq := uint32(101)
	for b := range 4 {
		ps = ps[:0]
		for i := range 40 {
			payload := bytes.Repeat([]byte{byte(b*40 + i)}, 1000)
			flags := uint8(packet.TCPAck)
			if i == 39 {
				flags |= packet.TCPPsh
			}
			ps = append(ps, seg(seq, ack, flags, payload))
			sent = append(sent, payload...)
			seq += 1000
		}
		batch(ps...)
		readBack(t, c, sent[len(sent)-40000:])
	}
	// The other way: the kernel's TSO super-packets, cut by our reader,
	// must give back the stream with valid checksums.
	back := bytes.Repeat([]byte("from the kernel's TCP "), 2500)
	if _, err := c.Write(back); err != nil {
		t.Fatal(err)
	}
	var recv []byte
	deadline := time.After(10 * time.Second)
	for len(recv) < len(back) {
		select {
		case p := <-pkts:
			in, err := packet.Parse(p)
			if err != nil || in.Proto != packet.ProtoTCP || in.DstPort != cli.Port() || len(in.Payload) == 0 {
				continue
			}
			if err := memtun.VerifyPacket(p); err != nil {
				t.Fatalf("segment read from the TUN: %v", err)
			}
			if len(p) > 1420 {
				t.Fatalf("a %d-byte packet read from a TUN with MTU 1420", len(p))
			}
			if int(in.Seq-ack) != len(recv) {
				t.Fatalf("segment at offset %d, want %d", in.Seq-ack, len(recv))
			}
			recv = append(recv, in.Payload...)
			// acknowledge so the window stays open
			batch(seg(seq, in.Seq+uint32(len(in.Payload)), packet.TCPAck, nil))
		case <-deadline:
			t.Fatalf("%d of %d bytes from the kernel arrived", len(recv), len(back))
		}
	}
	if !bytes.Equal(recv, back) {
		t.Fatal("the kernel's stream differs from what it sent")
	}
	// 41 UDP, SYN and ACK, then 4 batches of 40 segments in 4 writes.
	if w, n := tun.WriteCounts(dev); n < 41+2+160 || w > n-160+4 {
		t.Fatalf("%d packets in %d writes: the TCP batches were not coalesced", n, w)
	}
}

// readBack reads len(want) bytes from c and compares them with want.
func readBack(t *testing.T, c net.Conn, want []byte) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %d bytes: %v", len(want), err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the TCP stream differs from what was written")
	}
}

// gsoMaxOf reads the interface's GSO maximum as `ip -d link show` has it.
func gsoMaxOf(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("ip", "-d", "link", "show", name).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -d link show %s: %v\n%s", name, err, out)
	}
	f := strings.Fields(string(out))
	for i := range len(f) - 1 {
		if f[i] == "gso_max_size" {
			return f[i+1]
		}
	}
	t.Fatalf("no gso_max_size in:\n%s", out)
	return ""
}

// SetGSOMaxSize changes the interface's GSO maximum (which bounds the TSO
// super-packets TCP sends through it) and refuses sizes the kernel would.
func TestKernelTUNSetGSOMaxSize(t *testing.T) {
	requireRoot(t)
	name := fmt.Sprintf("fipsg%d", os.Getpid()%100000)
	dev, _, _ := upTUN(t, name, (os.Getpid()+1)%256)
	sz, ok := dev.(interface{ SetGSOMaxSize(int) error })
	if !ok {
		t.Fatalf("%T cannot set its GSO maximum", dev)
	}
	if err := sz.SetGSOMaxSize(62007); err != nil {
		t.Fatal(err)
	}
	if got := gsoMaxOf(t, name); got != "62007" {
		t.Fatalf("gso_max_size %s after setting 62007", got)
	}
	for _, bad := range []int{0, -1, 1<<16 + 1} {
		if err := sz.SetGSOMaxSize(bad); err == nil {
			t.Errorf("SetGSOMaxSize(%d) accepted", bad)
		}
	}
	if got := gsoMaxOf(t, name); got != "62007" {
		t.Fatalf("gso_max_size %s after refused settings, want 62007 still", got)
	}
	if err := sz.SetGSOMaxSize(1 << 16); err != nil {
		t.Fatal(err)
	}
	if got := gsoMaxOf(t, name); got != "65536" {
		t.Fatalf("gso_max_size %s after setting the default back", got)
	}
}
