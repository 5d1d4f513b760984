package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The traffic helper. The test binary re-executes itself inside a namespace
// with helperEnv set to a JSON helperSpec; it then sends or receives one
// deterministic stream and prints, on stdout, "ready" once listening,
// "progress N" (bytes or datagrams so far) every 200 ms, and finally
// "result {json helperResult}".
//
// TCP: the source sends a ChaCha8 stream (seeded) and the sink reports the
// SHA-256 and length of what it read, so the two ends' digests must match.
// UDP: every datagram carries its sequence number and a payload derived
// from (seed, seq), so the sink checks each one that arrived on its own;
// loss is allowed, corruption is not.
const helperEnv = "FIPS_E2E_HELPER"

type helperSpec struct {
	Mode     string        `json:"mode"` // tcp-sink, tcp-source, udp-sink, udp-source
	Addr     string        `json:"addr"` // where sinks listen and sources send
	Bytes    int64         `json:"bytes,omitempty"`
	Duration time.Duration `json:"duration,omitempty"` // tcp-source with Bytes 0: send this long
	Rate     int64         `json:"rate,omitempty"`     // bytes per second, 0: unlimited
	Seed     uint64        `json:"seed"`
	Count    int           `json:"count,omitempty"`     // udp: datagrams
	Size     int           `json:"size,omitempty"`      // udp: datagram length, >= 16
	Timeout  time.Duration `json:"timeout"`             // the whole run
	Target   string        `json:"target,omitempty"`    // socks-udp-*: the IPv4:port the datagrams are for
	Auth     string        `json:"auth,omitempty"`      // socks-udp-client: USER:PASS
	NamePort bool          `json:"name_port,omitempty"` // socks-udp-client: name its port in UDP ASSOCIATE
}

type helperResult struct {
	Bytes     int64   `json:"bytes"`
	SHA256    string  `json:"sha256,omitempty"`
	Datagrams int     `json:"datagrams,omitempty"` // udp: distinct intact datagrams
	Corrupt   int     `json:"corrupt,omitempty"`
	MTU       int     `json:"mtu,omitempty"` // udp-pmtu: the route MTU the socket learned
	Dups      int     `json:"dups,omitempty"`
	Seconds   float64 `json:"seconds"`
	Err       string  `json:"err,omitempty"`
}

// printer serialises the helper's stdout lines.
type printer struct{ mu sync.Mutex }

func (p *printer) line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

func helperMain(specJSON string) int {
	var s helperSpec
	if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
		fmt.Fprintln(os.Stderr, "helper: bad spec:", err)
		return 2
	}
	if s.Timeout <= 0 {
		s.Timeout = 2 * time.Minute
	}
	out := &printer{}
	start := time.Now()
	var res helperResult
	var err error
	switch s.Mode {
	case "tcp-sink":
		res, err = tcpSink(s, out)
	case "tcp-source":
		res, err = tcpSource(s, out)
	case "udp-sink":
		res, err = udpSink(s, out)
	case "udp-source":
		res, err = udpSource(s, out)
	case "udp-pmtu":
		res, err = udpPMTU(s)
	case "services":
		res, err = services(s, out)
	case "echo-check":
		res, err = echoCheck(s, out)
	case "socks-udp-client":
		res, err = socksUDPClient(s, out)
	case "socks-udp-attacker":
		res, err = socksUDPAttacker(s, out)
	default:
		err = fmt.Errorf("unknown mode %q", s.Mode)
	}
	res.Seconds = time.Since(start).Seconds()
	if err != nil {
		res.Err = err.Error()
	}
	b, _ := json.Marshal(res)
	out.line("result %s", b)
	if err != nil {
		return 1
	}
	return 0
}

// reportProgress prints n every 200 ms until the returned stop is called.
func reportProgress(out *printer, n *atomic.Int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				out.line("progress %d", n.Load())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func tcpSink(s helperSpec, out *printer) (helperResult, error) {
	deadline := time.Now().Add(s.Timeout)
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return helperResult{}, err
	}
	out.line("ready")
	ln.(*net.TCPListener).SetDeadline(deadline)
	c, err := ln.Accept()
	ln.Close()
	if err != nil {
		return helperResult{}, fmt.Errorf("accept: %w", err)
	}
	defer c.Close()
	c.SetDeadline(deadline)
	h := sha256.New()
	var n atomic.Int64
	stop := reportProgress(out, &n)
	defer stop()
	buf := make([]byte, 256<<10)
	for {
		k, err := c.Read(buf)
		h.Write(buf[:k])
		n.Add(int64(k))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return helperResult{Bytes: n.Load()}, fmt.Errorf("read after %d bytes: %w", n.Load(), err)
		}
	}
	return helperResult{Bytes: n.Load(), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

func seed32(seed uint64) [32]byte {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return s
}

// pace sleeps until sending sent bytes at rate bytes/s since start is due.
func pace(start time.Time, sent, rate int64) {
	if rate <= 0 {
		return
	}
	due := time.Duration(float64(sent) / float64(rate) * float64(time.Second))
	if d := due - time.Since(start); d > 0 {
		time.Sleep(d)
	}
}

func dialRetry(network, addr string, deadline time.Time) (net.Conn, error) {
	for {
		c, err := net.DialTimeout(network, addr, 5*time.Second)
		if err == nil || time.Now().After(deadline) {
			return c, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tcpSource(s helperSpec, out *printer) (helperResult, error) {
	deadline := time.Now().Add(s.Timeout)
	c, err := dialRetry("tcp", s.Addr, deadline)
	if err != nil {
		return helperResult{}, err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	gen := rand.NewChaCha8(seed32(s.Seed))
	h := sha256.New()
	chunk := 256 << 10
	if s.Rate > 0 {
		chunk = 32 << 10
	}
	buf := make([]byte, chunk)
	var sent atomic.Int64
	stop := reportProgress(out, &sent)
	defer stop()
	start := time.Now()
	for {
		n := int64(len(buf))
		if s.Bytes > 0 {
			n = min(n, s.Bytes-sent.Load())
		} else if time.Since(start) >= s.Duration {
			n = 0
		}
		if n <= 0 {
			break
		}
		gen.Read(buf[:n])
		h.Write(buf[:n])
		if _, err := c.Write(buf[:n]); err != nil {
			return helperResult{Bytes: sent.Load()}, fmt.Errorf("write after %d bytes: %w", sent.Load(), err)
		}
		pace(start, sent.Add(n), s.Rate)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return helperResult{Bytes: sent.Load()}, err
	}
	// The sink closes once it has read everything; wait for that, so that
	// this process exiting means the data arrived.
	if _, err := io.Copy(io.Discard, c); err != nil {
		return helperResult{Bytes: sent.Load()}, fmt.Errorf("waiting for the sink to finish: %w", err)
	}
	return helperResult{Bytes: sent.Load(), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

const udpEndSeq = ^uint64(0)

// fillDatagram writes datagram seq: seq, seed, then PCG(seed, seq) bytes.
func fillDatagram(b []byte, seed, seq uint64) {
	binary.BigEndian.PutUint64(b[0:8], seq)
	binary.BigEndian.PutUint64(b[8:16], seed)
	r := rand.NewPCG(seed, seq)
	var w [8]byte
	for i := 16; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(b[i:], w[:])
	}
}

func udpSource(s helperSpec, out *printer) (helperResult, error) {
	if s.Size < 16 {
		return helperResult{}, fmt.Errorf("datagram size %d < 16", s.Size)
	}
	c, err := net.Dial("udp", s.Addr)
	if err != nil {
		return helperResult{}, err
	}
	defer c.Close()
	buf := make([]byte, s.Size)
	var sent atomic.Int64
	stop := reportProgress(out, &sent)
	defer stop()
	start := time.Now()
	for i := 0; i < s.Count; i++ {
		fillDatagram(buf, s.Seed, uint64(i))
		// A send error (an ICMP error reported back) loses this datagram,
		// which the sink counts as lost; keep going.
		c.Write(buf)
		sent.Add(1)
		pace(start, int64(i+1)*int64(s.Size), s.Rate)
	}
	end := make([]byte, 16)
	binary.BigEndian.PutUint64(end, udpEndSeq)
	for range 5 {
		c.Write(end)
		time.Sleep(50 * time.Millisecond)
	}
	return helperResult{Datagrams: s.Count, Bytes: int64(s.Count) * int64(s.Size)}, nil
}

func udpSink(s helperSpec, out *printer) (helperResult, error) {
	deadline := time.Now().Add(s.Timeout)
	pc, err := net.ListenPacket("udp", s.Addr)
	if err != nil {
		return helperResult{}, err
	}
	defer pc.Close()
	pc.(*net.UDPConn).SetReadBuffer(8 << 20)
	out.line("ready")
	seen := make([]bool, s.Count)
	want := make([]byte, s.Size)
	buf := make([]byte, 65536)
	var res helperResult
	var got atomic.Int64
	stop := reportProgress(out, &got)
	defer stop()
	pc.SetReadDeadline(deadline)
	for {
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && got.Load() > 0 {
				break // idle after traffic: the end markers were lost
			}
			return res, err
		}
		d := buf[:n]
		if n == 16 && binary.BigEndian.Uint64(d) == udpEndSeq {
			break
		}
		// Idle for 3 s after traffic started means the sender is done.
		pc.SetReadDeadline(minTime(deadline, time.Now().Add(3*time.Second)))
		seq := uint64(0)
		if n >= 8 {
			seq = binary.BigEndian.Uint64(d)
		}
		if n != s.Size || seq >= uint64(s.Count) {
			res.Corrupt++
			continue
		}
		fillDatagram(want, s.Seed, seq)
		switch {
		case !bytes.Equal(d, want):
			res.Corrupt++
		case seen[seq]:
			res.Dups++
		default:
			seen[seq] = true
			res.Datagrams++
			res.Bytes += int64(n)
			got.Add(1)
		}
	}
	return res, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
