package peerstate

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

func sample() []Entry {
	return []Entry{
		{ID: IDOf([32]byte{1}), Endpoint: netip.MustParseAddrPort("192.0.2.7:51820"), LastActive: 1_700_000_000},
		{ID: IDOf([32]byte{2}), Endpoint: netip.MustParseAddrPort("[2001:db8::1]:443"), LastActive: 1_700_000_005},
	}
}

func TestRoundTrip(t *testing.T) {
	b, err := Append(nil, 1_700_000_010, sample())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != headerLen+2*entryLen+sumLen {
		t.Fatalf("%d bytes", len(b))
	}
	w, got, err := Parse(append(b, "stale tail"...))
	if err != nil || w != 1_700_000_010 || len(got) != 2 {
		t.Fatalf("Parse = %d, %v, %v", w, got, err)
	}
	for i, e := range sample() {
		if got[i] != e {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], e)
		}
	}
}

func TestRejects(t *testing.T) {
	good, _ := Append(nil, 1, sample())
	flip := bytes.Clone(good)
	flip[30] ^= 1
	trunc := good[:len(good)-1]
	many := bytes.Clone(good)
	many[16], many[17] = 0xff, 0xff
	for name, b := range map[string][]byte{
		"empty": nil, "flipped bit": flip, "truncated": trunc, "too many": many,
		"other file": []byte("[Interface]\nPrivateKey = x\n.................."),
	} {
		if _, _, err := Parse(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
	if _, err := Append(nil, 0, make([]Entry, MaxEntries+1)); err == nil {
		t.Error("Append accepted more than MaxEntries")
	}
}

func TestIDIsNotTheKey(t *testing.T) {
	pub := [32]byte{9, 9, 9}
	id := IDOf(pub)
	if bytes.Contains(pub[:], id[:8]) || IDOf([32]byte{9, 9, 8}) == id {
		t.Fatal("key id leaks the key or collides")
	}
}

func FuzzParse(f *testing.F) {
	good, _ := Append(nil, 5, sample())
	f.Add(good)
	f.Add(good[:30])
	f.Fuzz(func(t *testing.T, b []byte) {
		w, entries, err := Parse(b)
		if err != nil {
			return
		}
		again, err := Append(nil, w, entries)
		if err != nil {
			t.Fatal(err)
		}
		w2, e2, err := Parse(again)
		if err != nil || w2 != w || len(e2) != len(entries) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
