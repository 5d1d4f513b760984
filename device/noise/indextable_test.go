package noise

import (
	"bytes"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
)

func TestIndexTable(t *testing.T) {
	tab := NewIndexTable[string](rand.Reader)
	seen := map[uint32]bool{}
	for i := range 1000 {
		idx, err := tab.Insert("v")
		if err != nil {
			t.Fatal(err)
		}
		if idx == 0 || seen[idx] {
			t.Fatalf("insert %d: index %#x zero or reused", i, idx)
		}
		seen[idx] = true
	}
	if tab.Len() != 1000 {
		t.Fatal("Len", tab.Len())
	}
	idx, _ := tab.Insert("handshake")
	if v, ok := tab.Lookup(idx); !ok || v != "handshake" {
		t.Fatal("Lookup", v, ok)
	}
	if !tab.Replace(idx, "keypair") {
		t.Fatal("Replace of a used index")
	}
	if v, _ := tab.Lookup(idx); v != "keypair" {
		t.Fatal("Replace did not store")
	}
	if tab.Replace(0, "x") {
		t.Fatal("Replace of an unused index")
	}
	tab.Delete(idx)
	tab.Delete(idx)
	tab.Delete(0)
	if _, ok := tab.Lookup(idx); ok || tab.Len() != 1000 {
		t.Fatal("Delete")
	}
}

// TestIndexTableDraws checks the draw order: zero and used indices are
// skipped, a constant source gives up instead of spinning, a failing one
// reports ErrRandom.
func TestIndexTableDraws(t *testing.T) {
	src := []byte{0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0}
	tab := NewIndexTable[int](bytes.NewReader(src))
	if idx, err := tab.Insert(1); err != nil || idx != 1 {
		t.Fatalf("first insert: %d %v", idx, err)
	}
	if idx, err := tab.Insert(2); err != nil || idx != 2 {
		t.Fatalf("second insert skips the used index: %d %v", idx, err)
	}
	zeros := NewIndexTable[int](bytes.NewReader(make([]byte, 4*maxIndexDraws)))
	if _, err := zeros.Insert(1); !errors.Is(err, ErrIndexSpace) {
		t.Fatalf("all-zero source: %v", err)
	}
	if _, err := NewIndexTable[int](failingReader{}).Insert(1); !errors.Is(err, ErrRandom) {
		t.Fatalf("failing source: %v", err)
	}
}

func TestIndexTableLookupAllocs(t *testing.T) {
	tab := NewIndexTable[*Keypair](rand.Reader)
	idx, _ := tab.Insert(&Keypair{})
	if n := testing.AllocsPerRun(1000, func() { tab.Lookup(idx) }); n != 0 {
		t.Fatalf("Lookup allocates %v times", n)
	}
	if n := testing.AllocsPerRun(1000, func() { tab.Lookup(idx + 1) }); n != 0 {
		t.Fatalf("missing Lookup allocates %v times", n)
	}
}

// TestIndexTableConcurrent runs inserts, lookups and deletes together (run
// with -race).
func TestIndexTableConcurrent(t *testing.T) {
	tab := NewIndexTable[int](rand.Reader)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				idx, err := tab.Insert(g*1000 + i)
				if err != nil {
					t.Error(err)
					return
				}
				if v, ok := tab.Lookup(idx); !ok || v != g*1000+i {
					t.Errorf("lookup %#x: %d %v", idx, v, ok)
				}
				if i%2 == 0 {
					tab.Delete(idx)
				}
			}
		})
	}
	wg.Wait()
	if tab.Len() != 400 {
		t.Fatal("Len", tab.Len())
	}
}
