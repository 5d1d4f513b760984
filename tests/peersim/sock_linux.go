//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/fips-go/fips-go/device/noise"
)

// listen opens one of the receiving sockets of a source port: every one
// binds the wildcard address (the whole source prefix is local here) with
// SO_REUSEPORT, so the kernel spreads the gateway's replies over them.
func listen(port uint16) (*ipv4.PacketConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			// Deep buffers: a storm's replies arrive faster than one
			// goroutine's DH. FORCE needs root; the plain one is the
			// fallback.
			for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
				if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[0], 8<<20) != nil {
					unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[1], 8<<20)
				}
			}
		})
		return errors.Join(err, serr)
	}}
	c, err := lc.ListenPacket(context.Background(), "udp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return nil, fmt.Errorf("listen on port %d: %w", port, err)
	}
	return ipv4.NewPacketConn(c), nil
}

// pktinfo is the control message that makes a datagram leave from src.
func pktinfo(src [4]byte) []byte {
	b := make([]byte, unix.CmsgSpace(unix.SizeofInet4Pktinfo))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
	pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&b[unix.CmsgLen(0)]))
	pi.Spec_dst = src
	return b
}

// sender gathers one goroutine's outgoing datagrams into a sendmmsg batch
// per source port. It is not safe for concurrent use; each goroutine that
// sends has its own.
type sender struct {
	s       *sim
	msgs    [][]ipv4.Message // [source port], up to batchSize each
	bufs    [][][]byte
	oobs    [][][]byte
	nonce   noise.Nonce
	scratch [bufSize]byte
}

func newSender(s *sim) *sender {
	o := &sender{s: s}
	for range s.conns {
		msgs := make([]ipv4.Message, 0, batchSize)
		bufs := make([][]byte, batchSize)
		for i := range bufs {
			bufs[i] = make([]byte, bufSize)
		}
		o.msgs = append(o.msgs, msgs)
		o.bufs = append(o.bufs, bufs)
		oobs := make([][]byte, batchSize)
		for i := range oobs {
			oobs[i] = pktinfo([4]byte{})
		}
		o.oobs = append(o.oobs, oobs)
	}
	return o
}

// add appends peer i's datagram, which fill writes into the whole
// buffer it is given and returns.
func (o *sender) add(i int, fill func(b []byte) []byte) {
	src, port := outerSource(o.s.o.src, o.s.o.basePort, i)
	k := int(port - o.s.o.basePort)
	if len(o.msgs[k]) == batchSize {
		o.flushPort(k)
	}
	j := len(o.msgs[k])
	b := fill(o.bufs[k][j])
	oob := o.oobs[k][j]
	(*unix.Inet4Pktinfo)(unsafe.Pointer(&oob[unix.CmsgLen(0)])).Spec_dst = src
	o.msgs[k] = append(o.msgs[k], ipv4.Message{Buffers: [][]byte{b}, OOB: oob, Addr: o.s.gwAddr})
}

func (o *sender) flush() {
	for k := range o.msgs {
		o.flushPort(k)
	}
}

// flushPort sends port k's batch; a send the kernel refuses for want of
// buffer is retried a few times, then the rest is dropped and counted.
func (o *sender) flushPort(k int) {
	msgs := o.msgs[k]
	c := o.s.conns[k][0]
	for tries := 0; len(msgs) > 0 && tries < 50; {
		n, err := c.WriteBatch(msgs, 0)
		if n > 0 {
			o.s.c.sent.Add(uint64(n))
			msgs = msgs[n:]
		}
		if err != nil {
			tries++
			if !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) {
				o.s.c.sendErrors.Add(uint64(len(msgs[:1])))
				msgs = msgs[1:] // this one is refused; go on with the rest
				continue
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	o.s.c.sendErrors.Add(uint64(len(msgs)))
	o.msgs[k] = o.msgs[k][:0]
}
