package obfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSignature(t *testing.T) {
	now := time.Unix(0x01020304, 0)
	rnd := bytes.NewReader(bytes.Repeat([]byte{0xff, 0x07, 0x33}, 100))
	sig, err := ParseSignature("  <b 0xC0FFee> <t><r 3>\t<rc 4> <rd 5> <d> <ds> <dz 2> <b 01>  ")
	if err != nil {
		t.Fatal(err)
	}
	if sig.Len() != 3+4+3+4+5+2+1 {
		t.Fatalf("Len %d", sig.Len())
	}
	out, err := sig.Append([]byte("x"), now, rnd)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1+sig.Len() {
		t.Fatalf("%d bytes, want %d", len(out), 1+sig.Len())
	}
	out = out[1:]
	if !bytes.Equal(out[:3], []byte{0xc0, 0xff, 0xee}) || binary.BigEndian.Uint32(out[3:]) != 0x01020304 {
		t.Fatalf("bytes or time wrong: % x", out[:7])
	}
	if !bytes.Equal(out[7:10], []byte{0xff, 0x07, 0x33}) {
		t.Fatalf("random bytes not from rand: % x", out[7:10])
	}
	for _, c := range out[10:14] {
		if !strings.ContainsRune(letters, rune(c)) {
			t.Fatalf("<rc> gave %q", out[10:14])
		}
	}
	for _, c := range out[14:19] {
		if c < '0' || c > '9' {
			t.Fatalf("<rd> gave %q", out[14:19])
		}
	}
	if !bytes.Equal(out[19:], []byte{0, 0, 1}) {
		t.Fatalf("tail % x", out[19:])
	}
	if s, err := ParseSignature(" \t"); err != nil || s != nil {
		t.Fatalf("blank: %v %v", s, err)
	}
}

func TestSignatureRejects(t *testing.T) {
	for _, spec := range []string{
		"<", "<b 0x0>", "<b 0xzz>", "<b>", "<b 0x>", "<r>", "<r 0>", "<r -1>", "<r 1281>", "<r x>",
		"<t 5>", "<q>", "<>", "< >", "text", "<r 2> tail", "<d>", "<ds> <d>", "<r 1 2>",
		"<r 1280> <b 00>", strings.Repeat("<r 100>", 13),
	} {
		if _, err := ParseSignature(spec); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%q: got %v, want ErrBadSignature", spec, err)
		}
	}
}

func FuzzSignature(f *testing.F) {
	for _, s := range []string{"<b 0xc0ff> <r 8> <t>", "<rc 5><rd 3>", "<dz 4> <d>", "", "<b", "<r 1280>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		sig, err := ParseSignature(spec)
		if err != nil {
			if !errors.Is(err, ErrBadSignature) {
				t.Fatalf("%q: error %v does not wrap ErrBadSignature", spec, err)
			}
			return
		}
		if sig.Len() > MaxDatagram {
			t.Fatalf("%q: %d bytes", spec, sig.Len())
		}
		out, err := sig.Append(nil, time.Unix(1, 0), bytes.NewReader(make([]byte, MaxDatagram)))
		if err != nil || len(out) != sig.Len() {
			t.Fatalf("%q: %d bytes (%v), Len %d", spec, len(out), err, sig.Len())
		}
		if (strings.TrimSpace(spec) == "") != (sig == nil) {
			t.Fatalf("%q: nil %v", spec, sig == nil)
		}
	})
}
