package conn

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// countConn counts the writes that reach the TCP connection.
type countConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// tlsPair is a TLS client over a batchConn over a counted TCP connection,
// and the server side's plaintext reader.
func tlsPair(t *testing.T) (*batchConn, *countConn, net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cert, err := selfSigned("")
	if err != nil {
		t.Fatal(err)
	}
	srvc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvc <- nil
			return
		}
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
		if tc.Handshake() != nil {
			c.Close()
			srvc <- nil
			return
		}
		srvc <- tc
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := &countConn{Conn: raw}
	bw := &batchConn{Conn: cc}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := clientTLS(ctx, bw, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := <-srvc
	if srv == nil {
		t.Fatal("server handshake failed")
	}
	t.Cleanup(func() { cli.Close(); srv.Close() })
	return bw, cc, cli, srv
}

// One write of the send queue over TLS reaches the TCP connection in one
// system call per tlsBatchBytes, not one per 16 KiB record, and arrives
// whole and in order; outside begin/flush, writes pass straight through.
func TestStreamTLSBatchesRecords(t *testing.T) {
	bw, cc, cli, srv := tlsPair(t)
	const n = 512 << 10
	msg := make([]byte, n)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, n+5)
		srv.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.ReadFull(srv, b)
		if err != nil {
			b = nil
		}
		got <- b
	}()
	before := cc.writes.Load()
	bw.begin()
	if _, err := cli.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := bw.flush(); err != nil {
		t.Fatal(err)
	}
	batched := cc.writes.Load() - before
	// 32 records of 16 KiB plus their overhead: five batches at most.
	if want := int64(n/tlsBatchBytes + 1); batched > want {
		t.Errorf("%d KiB of records took %d TCP writes, want at most %d", n>>10, batched, want)
	}
	before = cc.writes.Load()
	if _, err := cli.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	if w := cc.writes.Load() - before; w != 1 {
		t.Errorf("a write outside a batch took %d TCP writes, want 1 (straight through)", w)
	}
	b := <-got
	if b == nil || !bytes.Equal(b[:n], msg) || string(b[n:]) != "after" {
		t.Fatal("the server did not read what was written, in order")
	}
	bw.release()
	if bw.buf != nil {
		t.Error("release kept the buffer")
	}
}
