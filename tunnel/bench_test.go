package tunnel_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/app/bench"
	"github.com/fips-go/fips-go/tunnel"
	wgconn "golang.zx2c4.com/wireguard/conn"
	wgdevice "golang.zx2c4.com/wireguard/device"
	wgnetstack "golang.zx2c4.com/wireguard/tun/netstack"
)

// BenchmarkTunnelTCP streams one TCP connection between two tunnels in
// this process over loopback: this package's, and wireguard-go's device
// on its tun/netstack, the library most such programs use today. Besides
// MB/s it reports Gbit/s and the process's CPU seconds per GB carried.
func BenchmarkTunnelTCP(b *testing.B) {
	b.Run("fips-go", func(b *testing.B) {
		server, client := pair(b, true)
		ln, err := server.Listen("tcp", ":9001")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		streamTCP(b, ln, func() (net.Conn, error) {
			return client.DialContext(context.Background(), "tcp", serverAddr.String()+":9001")
		})
	})
	b.Run("wireguard-go", func(b *testing.B) {
		srv, cli := wgPair(b)
		ln, err := srv.ListenTCPAddrPort(netip.AddrPortFrom(serverAddr, 9001))
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		streamTCP(b, ln, func() (net.Conn, error) {
			return cli.DialContextTCPAddrPort(context.Background(), netip.AddrPortFrom(serverAddr, 9001))
		})
	})
}

// streamTCP sends b.N chunks of 256 KiB and stops the clock when the
// receiver has read the last byte.
func streamTCP(b *testing.B, ln net.Listener, dial func() (net.Conn, error)) {
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	c, err := dial()
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 256<<10)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	cpu0 := bench.CPUTime()
	for range b.N {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	if n := <-got; n != int64(b.N*len(buf)) {
		b.Fatalf("received %d of %d bytes", n, b.N*len(buf))
	}
	b.StopTimer()
	gb := float64(b.N*len(buf)) / 1e9
	b.ReportMetric(gb*8/b.Elapsed().Seconds(), "Gbit/s")
	b.ReportMetric((bench.CPUTime()-cpu0).Seconds()/gb, "CPU-s/GB")
}

// wgPair is two wireguard-go devices on wireguard-go's netstack, peered
// over loopback at the same addresses pair uses.
func wgPair(b testing.TB) (server, client *wgnetstack.Net) {
	sk, ck := newKey(), newKey()
	server, port := wgNode(b, serverAddr, sk.private, fmt.Sprintf("public_key=%s\nallowed_ip=%v/32\n", hexKey(b, ck.public), clientAddr))
	client, _ = wgNode(b, clientAddr, ck.private, fmt.Sprintf("public_key=%s\nallowed_ip=10.77.0.0/24\nendpoint=127.0.0.1:%d\n", hexKey(b, sk.public), port))
	return server, client
}

// wgNode is a wireguard-go device on its netstack at addr, configured
// with key and the UAPI lines uapi; it closes at the test's end.
func wgNode(t testing.TB, addr netip.Addr, key, uapi string) (*wgnetstack.Net, uint16) {
	t.Helper()
	tdev, tnet, err := wgnetstack.CreateNetTUN([]netip.Addr{addr}, nil, 1420)
	if err != nil {
		t.Fatal(err)
	}
	dev := wgdevice.NewDevice(tdev, wgconn.NewDefaultBind(), wgdevice.NewLogger(wgdevice.LogLevelSilent, ""))
	t.Cleanup(dev.Close)
	if err := dev.IpcSet("private_key=" + hexKey(t, key) + "\nlisten_port=0\n" + uapi); err != nil {
		t.Fatal(err)
	}
	if err := dev.Up(); err != nil {
		t.Fatal(err)
	}
	s, err := dev.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "listen_port="); ok {
			if p, err := strconv.ParseUint(v, 10, 16); err == nil && p != 0 {
				return tnet, uint16(p)
			}
		}
	}
	t.Fatal("wireguard-go: no listen port")
	return nil, 0
}

// hexKey is a base64 key as UAPI spells it.
func hexKey(t testing.TB, s string) string {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(k)
}

// BenchmarkIdleTunnel measures what an open, idle tunnel costs: b.N pairs
// of tunnels, each pair with a completed handshake and no traffic, are
// opened and kept open; the metrics are the goroutines and live heap per
// tunnel (run with -benchtime=20x or so: each iteration is a pair).
func BenchmarkIdleTunnel(b *testing.B) {
	// One pair first, closed again, so that what gVisor and the runtime
	// set up once per process is not charged to the measured tunnels.
	s, c := idlePairTunnels(b)
	s.Close()
	c.Close()
	g0, h0 := settledGoroutines(0), heapInUse()
	var open []*tunnel.Tunnel
	for range b.N {
		server, client := idlePairTunnels(b)
		open = append(open, server, client)
	}
	b.StopTimer()
	g1, h1 := settledGoroutines(0), heapInUse()
	n := float64(len(open))
	b.ReportMetric(float64(g1-g0)/n, "goroutines/tunnel")
	b.ReportMetric(float64(int64(h1)-int64(h0))/n/1024, "heap-KiB/tunnel")
	for _, tn := range open {
		tn.Close()
	}
}

// idlePairTunnels is a server and a client tunnel, peered over loopback,
// after their first handshake, with no servers of their own.
func idlePairTunnels(b *testing.B) (server, client *tunnel.Tunnel) {
	sk, ck := newKey(), newKey()
	server = open(b, serverConf(sk, ck), tunnel.Options{})
	client = open(b, clientConf(ck, sk, "", fmt.Sprint("127.0.0.1:", server.Status().ListenPort)), tunnel.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := client.WaitHandshake(ctx); err != nil {
		b.Fatal(err)
	}
	return server, client
}
