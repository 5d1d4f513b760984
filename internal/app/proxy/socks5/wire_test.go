package socks5

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"testing"
)

func TestRequestRoundTrip(t *testing.T) {
	for _, req := range []Request{
		{Cmd: CmdConnect, Addr: Addr{IP: netip.MustParseAddr("10.0.0.1"), Port: 80}},
		{Cmd: CmdUDPAssociate, Addr: Addr{IP: netip.MustParseAddr("fd00::1"), Port: 53}},
		{Cmd: CmdConnect, Addr: Addr{Host: "peer.internal", Port: 443}},
	} {
		b, err := AppendRequest(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadRequest(bytes.NewReader(b))
		if err != nil || got != req {
			t.Errorf("%+v: read back %+v, %v", req, got, err)
		}
	}
}

func TestReadRequestErrors(t *testing.T) {
	for _, b := range [][]byte{
		{4, 1, 0, 1, 10, 0, 0, 1, 0, 80},      // SOCKS4
		{5, 1, 0, 9, 10, 0, 0, 1, 0, 80},      // unknown address type
		{5, 1, 0, 3, 0, 0, 80},                // empty name
		{5, 1, 0, 3, 3, 'a', ' ', 'b', 0, 80}, // space in name
		{5, 1, 0, 3, 3, 'a', '/', 'b', 0, 80}, // slash in name
	} {
		if _, err := ReadRequest(bytes.NewReader(b)); !errors.Is(err, ErrProtocol) {
			t.Errorf("% x: %v, want a protocol error", b, err)
		}
	}
	if _, err := ReadRequest(bytes.NewReader([]byte{5, 1, 0, 1, 10})); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated: %v", err)
	}
}

func TestUDPRoundTrip(t *testing.T) {
	a := Addr{IP: netip.MustParseAddr("10.0.0.1"), Port: 7}
	b, _ := AppendUDPHeader(nil, a)
	b = append(b, "payload"...)
	got, p, err := ParseUDP(b)
	if err != nil || got != a || string(p) != "payload" {
		t.Fatalf("%v %q %v", got, p, err)
	}
	b[2] = 1 // a fragment
	if _, _, err := ParseUDP(b); !errors.Is(err, ErrProtocol) {
		t.Errorf("fragment: %v", err)
	}
	if _, _, err := ParseUDP(b[:6]); !errors.Is(err, ErrProtocol) {
		t.Errorf("truncated: %v", err)
	}
}

func FuzzReadRequest(f *testing.F) {
	f.Add([]byte{5, 1, 0, 1, 10, 0, 0, 1, 0, 80})
	f.Add([]byte{5, 3, 0, 4, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 53})
	f.Add([]byte{5, 1, 0, 3, 4, 'p', 'e', 'e', 'r', 1, 187})
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ReadRequest(bytes.NewReader(b))
		if err != nil {
			return
		}
		out, err := AppendRequest(nil, req)
		if err != nil {
			t.Fatalf("cannot encode %+v: %v", req, err)
		}
		again, err := ReadRequest(bytes.NewReader(out))
		if err != nil || again != req {
			t.Fatalf("round trip %+v -> %+v, %v", req, again, err)
		}
	})
}

func FuzzParseUDP(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 10, 0, 0, 1, 0, 7, 'x'})
	f.Add([]byte{0, 0, 0, 3, 1, 'a', 0, 7})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, p, err := ParseUDP(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v is not a protocol error", err)
			}
			return
		}
		hdr, err := AppendUDPHeader(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		a2, p2, err := ParseUDP(append(hdr, p...))
		if err != nil || a2 != a || !bytes.Equal(p, p2) {
			t.Fatalf("round trip %v -> %v, %v", a, a2, err)
		}
	})
}

func FuzzHandshake(f *testing.F) {
	f.Add([]byte{5, 1, 2, 1, 1, 'u', 1, 'p'})
	f.Add([]byte{5, 2, 0, 2, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		if _, err := ReadGreeting(r); err != nil {
			return
		}
		ReadUserPass(r)
	})
}
