package userns

import (
	"encoding/binary"
	"testing"
)

func TestCheckChildNamespace(t *testing.T) {
	for _, tc := range []struct {
		uidMap string
		ok     bool
	}{
		{"         0       1000          1\n", true},
		{"0 0 1\n", true}, // Start run by root
		{"         0          0 4294967295\n", false}, // the initial namespace
		{"0 100000 65536\n", false},                   // a container
		{"0 1000 1\n1 100000 65536\n", false},
		{"1000 1000 1\n", false},
		{"", false},
		{"0 1000\n", false},
		{"0 1000 x\n", false},
		{"0 -1 1\n", false},
		{"0 1000 99999999999\n", false},
	} {
		err := checkChildNamespace(tc.uidMap)
		if (err == nil) != tc.ok {
			t.Errorf("uid_map %q: %v, want ok=%v", tc.uidMap, err, tc.ok)
		}
	}
}

func TestCheckAuxv(t *testing.T) {
	if err := checkAuxv([][2]uintptr{{6, 4096}, {atSecure, 0}}); err != nil {
		t.Errorf("AT_SECURE 0: %v", err)
	}
	if err := checkAuxv([][2]uintptr{{atSecure, 1}}); err != errSecure {
		t.Errorf("AT_SECURE 1: %v, want errSecure", err)
	}
	if err := checkAuxv(nil); err == nil {
		t.Error("an auxiliary vector without AT_SECURE passed")
	}
}

func TestParseAuxv(t *testing.T) {
	b := binary.LittleEndian.AppendUint64(nil, 6)
	b = binary.LittleEndian.AppendUint64(b, 4096)
	b = binary.LittleEndian.AppendUint64(b, atSecure)
	b = binary.LittleEndian.AppendUint64(b, 1)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint64(b, 0)
	got, err := parseAuxv(b, 8, binary.LittleEndian)
	if err != nil || len(got) != 2 || got[1] != [2]uintptr{atSecure, 1} {
		t.Fatalf("parseAuxv: %v, %v", got, err)
	}
	if _, err := parseAuxv(b[:len(b)-1], 8, binary.LittleEndian); err == nil {
		t.Error("a truncated vector parsed")
	}
	if _, err := parseAuxv(b, 3, binary.LittleEndian); err == nil {
		t.Error("word size 3 accepted")
	}
}

func FuzzGuardParsers(f *testing.F) {
	f.Add("0 1000 1\n", []byte{23, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, uidMap string, auxv []byte) {
		checkChildNamespace(uidMap)
		for _, w := range []int{4, 8} {
			if v, err := parseAuxv(auxv, w, binary.LittleEndian); err == nil {
				checkAuxv(v)
			}
		}
	})
}
