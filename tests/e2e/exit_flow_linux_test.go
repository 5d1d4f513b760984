package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// The exit's flow control end to end: two flows at once through the
// rootless exit, each with a fast sender and a receiver that reads at
// exitFlowRate. Down, a far server sends exitFlowBytes as fast as it can
// to a client that reads slowly; up, the client sends exitFlowBytes as
// fast as it can to a far server that reads slowly. Nothing may queue
// without bound: the exit's peak RSS (VmHWM) stays at most exitFlowMaxRSS
// (the target) while 2 GiB pass through it.
const (
	exitFlowBytes  = 1 << 30
	exitFlowRate   = 60_000_000 // bytes per second each slow end reads
	exitFlowMaxRSS = 64 << 20
)

func TestRootlessExitFlowControl(t *testing.T) {
	e := newExitEnv(t, fipsGo(t))
	// The far servers run in this process, listening in the far
	// namespace (a socket stays in the namespace it was made in).
	var src, sink net.Listener
	var err error
	inNetns(t, e.far, func() {
		if src, err = net.Listen("tcp", exitFar+":9001"); err == nil {
			sink, err = net.Listen("tcp", exitFar+":9002")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(); sink.Close() })
	deadline := time.Now().Add(3 * time.Minute)

	srcErr := make(chan error, 1)
	go func() {
		c, err := src.Accept()
		if err != nil {
			srcErr <- err
			return
		}
		defer c.Close()
		c.SetDeadline(deadline)
		srcErr <- blob(c, exitSeed+20, exitFlowBytes)
	}()
	type result struct {
		n   int64
		sum string
		err error
	}
	sinkRes := make(chan result, 1)
	go func() {
		c, err := sink.Accept()
		if err != nil {
			sinkRes <- result{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(deadline)
		n, sum, err := slowRead(c, exitFlowRate)
		sinkRes <- result{n, sum, err}
	}()

	down, err := e.dial(t, exitFar+":9001")
	if err != nil {
		t.Fatal(err)
	}
	up, err := e.dial(t, exitFar+":9002")
	if err != nil {
		t.Fatal(err)
	}
	down.SetDeadline(deadline)
	up.SetDeadline(deadline)
	upErr := make(chan error, 1)
	go func() {
		err := blob(up, exitSeed+21, exitFlowBytes)
		if err == nil {
			err = up.(*net.TCPConn).CloseWrite()
		}
		upErr <- err
	}()
	start := time.Now()
	n, sum, err := slowRead(down, exitFlowRate)
	if err != nil || n != exitFlowBytes || sum != blobSHA(exitSeed+20, exitFlowBytes) {
		t.Errorf("down (far server fast, client slow): read %d of %d bytes, %v, sha256 %s", n, exitFlowBytes, err, sum)
	}
	if err := <-srcErr; err != nil {
		t.Errorf("down: the far server: %v", err)
	}
	if err := <-upErr; err != nil {
		t.Errorf("up (client fast): %v", err)
	}
	r := <-sinkRes
	if r.err != nil || r.n != exitFlowBytes || r.sum != blobSHA(exitSeed+21, exitFlowBytes) {
		t.Errorf("up (client fast, far server slow): read %d of %d bytes, %v, sha256 %s", r.n, exitFlowBytes, r.err, r.sum)
	}
	hwm, err := peakRSS(e.pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d MiB each way in %.1f s with slow receivers; the exit's peak RSS %.1f MiB", exitFlowBytes>>20, time.Since(start).Seconds(), float64(hwm)/(1<<20))
	if hwm > exitFlowMaxRSS {
		t.Errorf("the exit's peak RSS %.1f MiB, want at most %d MiB", float64(hwm)/(1<<20), exitFlowMaxRSS>>20)
	}
}

// slowRead reads c to its end at most rate bytes a second and returns the
// bytes read and their SHA-256 in hex.
func slowRead(c net.Conn, rate int64) (int64, string, error) {
	h := sha256.New()
	buf := make([]byte, 64<<10)
	var n int64
	start := time.Now()
	for {
		k, err := c.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if errors.Is(err, io.EOF) {
			return n, hex.EncodeToString(h.Sum(nil)), nil
		}
		if err != nil {
			return n, hex.EncodeToString(h.Sum(nil)), err
		}
		pace(start, n, rate)
	}
}

// peakRSS is process pid's VmHWM in bytes, after checking that pid is the
// fips-go daemon.
func peakRSS(pid int) (int64, error) {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return 0, err
	}
	if c := strings.TrimSpace(string(comm)); c != "fips-go" {
		return 0, fmt.Errorf("process %d is %q, not the exit", pid, c)
	}
	kib := netnstest.ProcStatus(pid, "VmHWM")
	if kib == 0 {
		return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
	}
	return kib << 10, nil
}
