package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/app/bench"
	"github.com/fips-go/fips-go/internal/app/proxy/socks5"
	"github.com/fips-go/fips-go/internal/app/userns"
	"github.com/fips-go/fips-go/internal/engine"
	"github.com/fips-go/fips-go/tun"
	"github.com/urfave/cli/v3"
)

// The rootless modes side by side: `bench --mode socks5` puts a SOCKS5
// proxy in front of the netstack set-up; `bench --mode userns` runs the
// sender and the receiver as commands in two user namespaces whose kernel
// TUNs two devices here serve, as `userspace -- CMD` does.

// socks5Dial connects through a SOCKS5 server at server to to.
func socks5Dial(ctx context.Context, server string, to netip.AddrPort) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", server)
	if err != nil {
		return nil, err
	}
	req, _ := socks5.AppendRequest([]byte{5, 1, socks5.MethodNoAuth}, socks5.Request{Cmd: socks5.CmdConnect, Addr: socks5.AddrFrom(to)})
	if _, err := c.Write(req); err != nil {
		c.Close()
		return nil, err
	}
	var rep [2 + 10]byte // method reply, then an IPv4 reply
	if _, err := io.ReadFull(c, rep[:]); err != nil || rep[3] != socks5.RepSucceeded {
		c.Close()
		return nil, fmt.Errorf("socks5 connect: reply % x, %v", rep, err)
	}
	return c, nil
}

// startBenchSOCKS5 serves SOCKS5 on loopback into sender's stack.
func startBenchSOCKS5(ctx context.Context, sender *benchNode) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := socks5.New(socks5.Options{Dial: func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		return sender.ns.DialTCPAddrPort(ctx, ap)
	}})
	go srv.Serve(ctx, ln)
	return ln.Addr().String(), nil
}

// benchPeerCommand is the sender or receiver that `bench --mode userns`
// runs inside a namespace; not for users.
func benchPeerCommand() *cli.Command {
	return &cli.Command{
		Name:   "bench-peer",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "role"},
			&cli.StringFlag{Name: "addr"},
			&cli.IntFlag{Name: "streams", Value: 1},
			&cli.DurationFlag{Name: "duration", Value: 10 * time.Second},
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.String("role") == "sink" {
				return benchSink(c.String("addr"), int(c.Int("streams")))
			}
			return benchSource(c.String("addr"), int(c.Int("streams")), c.Duration("duration"))
		},
	}
}

// benchSink accepts streams connections, counts what they carry and
// prints "ready", "progress BYTES NANOS" each second and "result BYTES
// NANOS" once all streams ended; time runs from the first byte.
func benchSink(addr string, streams int) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println("ready")
	var n atomic.Uint64
	var first atomic.Int64
	var wg sync.WaitGroup
	for range streams {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		wg.Go(func() {
			defer c.Close()
			buf := make([]byte, 256<<10)
			for {
				k, err := c.Read(buf)
				if k > 0 {
					first.CompareAndSwap(0, time.Now().UnixNano())
					n.Add(uint64(k))
				}
				if err != nil {
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if f := first.Load(); f != 0 {
				fmt.Printf("progress %d %d\n", n.Load(), time.Now().UnixNano()-f)
			}
		case <-done:
			fmt.Printf("result %d %d\n", n.Load(), time.Now().UnixNano()-first.Load())
			return nil
		}
	}
}

// benchSource sends on streams connections to addr for d.
func benchSource(addr string, streams int, d time.Duration) error {
	var conns []net.Conn
	deadline := time.Now().Add(20 * time.Second)
	for range streams {
		var c net.Conn
		var err error
		for {
			// The first SYN may wait for the handshake; retry briskly.
			if c, err = net.DialTimeout("tcp", addr, time.Second); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			defer c.Close()
			buf := make([]byte, 128<<10)
			for time.Now().Before(stop) {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// nsBenchNode is one side of the userns bench: a device on a namespace's TUN.
type nsBenchNode struct {
	eng  *engine.Engine
	sess *userns.Session
	dev  *device.Device
	key  noise.PrivateKey
	addr netip.Addr
}

func startNSBenchNode(self string, name string, addr netip.Addr, mtu int, args []string, stdout io.Writer) (*nsBenchNode, error) {
	sess, err := userns.Start(userns.Options{Name: name, MTU: mtu, Addresses: []netip.Prefix{netip.PrefixFrom(addr, 24)},
		Args: append([]string{self}, args...), Stdout: stdout})
	if err != nil {
		return nil, err
	}
	t, err := tun.CreateDetached(sess.TUN, mtu)
	if err != nil {
		sess.Abort()
		return nil, err
	}
	q, key, err := benchQuick(addr, mtu)
	if err != nil {
		t.Close()
		sess.Abort()
		return nil, err
	}
	e, err := engine.Start(t, q, engine.Options{})
	if err != nil {
		sess.Abort()
		return nil, err
	}
	return &nsBenchNode{sess: sess, eng: e, dev: e.Device, key: key, addr: addr}, nil
}

func (n *nsBenchNode) peerWith(o *nsBenchNode) error {
	return peerOverLoopback(n.dev, o.dev, o.key.PublicKey(), o.addr)
}

func (n *nsBenchNode) close() {
	n.sess.Abort()
	n.eng.Close()
}

// runBenchUserns measures TCP between two namespaces' kernel stacks
// through two devices here.
func runBenchUserns(ctx context.Context, cfg benchConfig) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	to := "10.99.0.2:5201"
	streams, dur := strconv.Itoa(cfg.streams), cfg.duration.String()
	sink, err := startNSBenchNode(self, "fbench1", netip.MustParseAddr("10.99.0.2"), cfg.mtu,
		[]string{"bench-peer", "--role", "sink", "--addr", to, "--streams", streams}, w)
	if err != nil {
		w.Close()
		return fmt.Errorf("bench: %w", err)
	}
	defer sink.close()
	src, err := startNSBenchNode(self, "fbench0", netip.MustParseAddr("10.99.0.1"), cfg.mtu,
		[]string{"bench-peer", "--role", "source", "--addr", to, "--streams", streams, "--duration", dur}, os.Stderr)
	w.Close()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer src.close()
	if err := src.peerWith(sink); err != nil {
		return err
	}
	if err := sink.peerWith(src); err != nil {
		return err
	}
	lines := bufio.NewScanner(r)
	if err := sink.sess.Go(); err != nil {
		return err
	}
	if !lines.Scan() || lines.Text() != "ready" {
		return fmt.Errorf("bench: the receiver did not start")
	}
	fmt.Fprintf(cfg.log, "fips-go bench --mode userns: %d stream(s), %v, MTU %d, kernel TCP in two user namespaces\n", cfg.streams, cfg.duration, cfg.mtu)
	live := isTerminal(cfg.log)
	cpu0 := cpuAll()
	if err := src.sess.Go(); err != nil {
		return err
	}
	var bytes, nanos int64
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) != 3 {
			continue
		}
		bytes, _ = strconv.ParseInt(f[1], 10, 64)
		nanos, _ = strconv.ParseInt(f[2], 10, 64)
		if f[0] == "progress" {
			io.WriteString(cfg.log, progressLine(time.Duration(nanos), uint64(bytes), live))
		}
	}
	if live {
		fmt.Fprintln(cfg.log)
	}
	srcCode, sinkCode := src.sess.Wait(), sink.sess.Wait()
	if srcCode != 0 || sinkCode != 0 || nanos <= 0 {
		return fmt.Errorf("bench: sender exited %d, receiver %d", srcCode, sinkCode)
	}
	res := bench.Result{Bytes: uint64(bytes), Elapsed: time.Duration(nanos), CPU: cpuAll() - cpu0}
	if cfg.json {
		return writeBenchJSON(cfg.out, cfg, res, 0)
	}
	return writeBenchTable(cfg.out, res, 0, "both devices here, plus sender and receiver")
}
