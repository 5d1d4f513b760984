package privsep

import (
	"bytes"
	"errors"
	"testing"
)

func TestParseRequest(t *testing.T) {
	for _, r := range []Request{RouteSocket, RouteSocketLink, Exit} {
		got, err := ParseRequest(r.Append(nil))
		if err != nil || got != r {
			t.Errorf("ParseRequest(%#x) = %#x, %v", uint32(r), uint32(got), err)
		}
	}
	for _, b := range [][]byte{nil, {0}, {0, 0, 0}, {0, 0, 0, 0, 0}, Request(2).Append(nil), Request(0xffffffff).Append(nil)} {
		if _, err := ParseRequest(b); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseRequest(%x) = %v, want ErrBadRequest", b, err)
		}
	}
	if g := RouteSocketLink.Groups(); g != 1 {
		t.Errorf("RouteSocketLink.Groups() = %d", g)
	}
	for _, g := range []uint32{0, 1} {
		r, err := requestFor(g)
		if err != nil || r.Groups() != g {
			t.Errorf("requestFor(%d) = %v, %v", g, r, err)
		}
	}
	if _, err := requestFor(4); !errors.Is(err, ErrBadRequest) {
		t.Errorf("requestFor(RTMGRP_IPV4_IFADDR) = %v, want ErrBadRequest", err)
	}
}

// FuzzParseRequest: any input either parses to one of the three requests,
// whose encoding is the input again, or is ErrBadRequest; never a panic.
func FuzzParseRequest(f *testing.F) {
	for _, r := range []Request{RouteSocket, RouteSocketLink, Exit} {
		f.Add(r.Append(nil))
	}
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v is not ErrBadRequest", err)
			}
			return
		}
		if r != RouteSocket && r != RouteSocketLink && r != Exit {
			t.Fatalf("parsed %#x", uint32(r))
		}
		if !bytes.Equal(r.Append(nil), b) {
			t.Fatalf("%x parsed to %#x, which encodes differently", b, uint32(r))
		}
	})
}
