package proxy

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// Splice passes data and half-closes both ways, and ends a connection
// pair that stays idle.
func TestSplice(t *testing.T) {
	client, a := tcpPair(t)
	b, server := tcpPair(t)
	done := make(chan [2]int64, 1)
	go func() { ab, ba := Splice(context.Background(), a, b, time.Minute); done <- [2]int64{ab, ba} }()
	client.Write([]byte("request"))
	client.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(server) // ends at the half-close
	if string(got) != "request" {
		t.Fatalf("server got %q", got)
	}
	server.Write([]byte("response"))
	server.Close()
	got, _ = io.ReadAll(client)
	if string(got) != "response" {
		t.Fatalf("client got %q", got)
	}
	if n := <-done; n != [2]int64{7, 8} {
		t.Fatalf("counts %v", n)
	}

	client2, a2 := tcpPair(t)
	b2, server2 := tcpPair(t)
	defer client2.Close()
	defer server2.Close()
	idle := make(chan struct{})
	go func() { Splice(context.Background(), a2, b2, 50*time.Millisecond); close(idle) }()
	select {
	case <-idle:
	case <-time.After(10 * time.Second):
		t.Fatal("idle pair not closed")
	}
	client2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := client2.Read(make([]byte, 1)); err == nil {
		t.Fatal("client still connected after the idle timeout")
	}
}

func TestLimiter(t *testing.T) {
	l := NewLimiter(2)
	got := []bool{l.TryAcquire(), l.TryAcquire(), l.TryAcquire()}
	if !got[0] || !got[1] || got[2] {
		t.Fatalf("three tries with a limit of 2: %v", got)
	}
	l.Release()
	if !l.TryAcquire() {
		t.Fatal("released slot not reusable")
	}
}

func TestResolveAndDefaults(t *testing.T) {
	for in, want := range map[string]string{"1080": "127.0.0.1:1080", ":1080": "127.0.0.1:1080", "0.0.0.0:1080": "0.0.0.0:1080", "[::1]:1080": "[::1]:1080"} {
		if got := LoopbackDefault(in); got != want {
			t.Errorf("LoopbackDefault(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := ResolveHostPort(context.Background(), "name:80", nil); err == nil {
		t.Error("a name resolved without a resolver")
	}
	if ap, err := ResolveHostPort(context.Background(), "[fd00::1]:80", nil); err != nil || ap.String() != "[fd00::1]:80" {
		t.Errorf("literal: %v %v", ap, err)
	}
	for _, bad := range []string{"x:0", "x:65536", "x:-1", ":80", "x", "x:8a"} {
		if _, _, err := SplitHostPort(bad); err == nil {
			t.Errorf("SplitHostPort(%q) accepted", bad)
		}
	}
}
