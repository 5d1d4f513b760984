package allowedips

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// refTable is the brute-force model: a map from masked prefix to owner.
type refTable map[netip.Prefix]int

func (r refTable) lookup(a netip.Addr) (int, bool) {
	best, owner := -1, 0
	for p, v := range r {
		if p.Bits() > best && p.Contains(a) {
			best, owner = p.Bits(), v
		}
	}
	return owner, best >= 0
}

func (r refTable) prefixes(v int) []netip.Prefix {
	var out []netip.Prefix
	for p, o := range r {
		if o == v {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, netip.Prefix.Compare)
	return out
}

// checkInvariants verifies the trie's shape: parent links are consistent,
// children are strictly longer and inside their parent, glue nodes have two
// children (so the trie stays compressed) and counts and owner lists agree.
func checkInvariants[T comparable](t *testing.T, tb *Table[T]) {
	t.Helper()
	valued := 0
	var walk func(n, parent *node[T], is6 bool)
	walk = func(n, parent *node[T], is6 bool) {
		if n == nil {
			return
		}
		if n.parent != parent || n.is6 != is6 {
			t.Fatalf("node %v: bad parent link or family", n.prefix())
		}
		if parent != nil && (n.bits <= parent.bits || !parent.contains(n.key)) {
			t.Fatalf("node %v not strictly inside parent %v", n.prefix(), parent.prefix())
		}
		if n.key != n.key.masked(n.bits) {
			t.Fatalf("node %v key not masked", n.prefix())
		}
		if n.hasValue {
			valued++
		} else if n.child[0] == nil || n.child[1] == nil {
			t.Fatalf("glue node %v with fewer than two children", n.prefix())
		}
		for i, c := range n.child {
			if c != nil && c.key.bitAt(n.bits) != uint8(i) {
				t.Fatalf("child %v in wrong slot of %v", c.prefix(), n.prefix())
			}
			walk(c, n, is6)
		}
	}
	walk(tb.root4, nil, false)
	walk(tb.root6, nil, true)
	if valued != tb.Len() {
		t.Fatalf("Len() = %d, trie holds %d prefixes", tb.Len(), valued)
	}
	listed := 0
	for v, head := range tb.owned {
		if head == nil || head.prevOwned != nil {
			t.Fatalf("owner %v: bad list head", v)
		}
		for n := head; n != nil; n = n.nextOwned {
			if !n.hasValue || n.value != v || (n.nextOwned != nil && n.nextOwned.prevOwned != n) {
				t.Fatalf("owner %v: corrupt list at %v", v, n.prefix())
			}
			listed++
		}
	}
	if listed != valued {
		t.Fatalf("owner lists hold %d nodes, trie %d", listed, valued)
	}
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

func TestLookupBasics(t *testing.T) {
	var tb Table[string]
	for p, v := range map[string]string{
		"10.0.0.0/8": "a", "10.1.0.0/16": "b", "10.1.2.3/32": "c", "0.0.0.0/0": "d",
		"fd00::/8": "e", "fd00:1::/32": "f", "fd00:1::1/128": "g", "::/0": "h",
		"::ffff:10.0.0.0/104": "m",
	} {
		if err := tb.Insert(pfx(p), v); err != nil {
			t.Fatal(err)
		}
	}
	checkInvariants(t, &tb)
	for a, want := range map[string]string{
		"10.2.3.4": "a", "10.1.9.9": "b", "10.1.2.3": "c", "10.1.2.4": "b", "192.168.1.1": "d",
		"255.255.255.255": "d", "0.0.0.0": "d",
		"fd00::5": "e", "fd00:1::2": "f", "fd00:1::1": "g", "2001:db8::1": "h",
		"::ffff:10.1.2.3": "m", // 4-in-6 stays IPv6
		"::ffff:11.0.0.1": "h",
	} {
		got, ok := tb.Lookup(addr(a))
		if !ok || got != want {
			t.Errorf("Lookup(%s) = %q, %v; want %q", a, got, ok, want)
		}
	}
	if _, ok := tb.Lookup(netip.Addr{}); ok {
		t.Error("zero Addr matched")
	}
}

func TestEdges(t *testing.T) {
	var tb Table[int]
	if _, ok := tb.Lookup(addr("1.2.3.4")); ok {
		t.Fatal("empty table matched")
	}
	must(t, tb.Insert(pfx("255.255.255.255/32"), 1))
	must(t, tb.Insert(pfx("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"), 2))
	must(t, tb.Insert(pfx("0.0.0.0/32"), 3))
	must(t, tb.Insert(pfx("::/128"), 4))
	expect(t, &tb, "255.255.255.255", 1, true)
	expect(t, &tb, "255.255.255.254", 0, false)
	expect(t, &tb, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 2, true)
	expect(t, &tb, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", 0, false)
	expect(t, &tb, "0.0.0.0", 3, true)
	expect(t, &tb, "::", 4, true)
	expect(t, &tb, "::1", 0, false)
	// /0 in one family never matches the other.
	must(t, tb.Insert(pfx("0.0.0.0/0"), 5))
	expect(t, &tb, "8.8.8.8", 5, true)
	expect(t, &tb, "2001:db8::1", 0, false)
	must(t, tb.Insert(pfx("::/0"), 6))
	expect(t, &tb, "2001:db8::1", 6, true)
	// Host bits are masked on insert and remove.
	must(t, tb.Insert(pfx("192.168.7.77/24"), 7))
	expect(t, &tb, "192.168.7.1", 7, true)
	if got := tb.Prefixes(7); !slices.Equal(got, []netip.Prefix{pfx("192.168.7.0/24")}) {
		t.Fatalf("Prefixes(7) = %v", got)
	}
	if !tb.Remove(pfx("192.168.7.1/24"), 7) {
		t.Fatal("Remove with host bits failed")
	}
	checkInvariants(t, &tb)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func expect(t *testing.T, tb *Table[int], a string, want int, wantOK bool) {
	t.Helper()
	got, ok := tb.Lookup(addr(a))
	if ok != wantOK || got != want {
		t.Fatalf("Lookup(%s) = %d, %v; want %d, %v", a, got, ok, want, wantOK)
	}
}

func TestInvalidPrefix(t *testing.T) {
	var tb Table[int]
	bad := []netip.Prefix{
		{},
		netip.PrefixFrom(addr("1.2.3.4"), 33),
		netip.PrefixFrom(addr("1.2.3.4"), -1),
		netip.PrefixFrom(addr("::1"), 129),
		netip.PrefixFrom(netip.Addr{}, 0),
	}
	for _, p := range bad {
		if err := tb.Insert(p, 1); !errors.Is(err, ErrInvalidPrefix) {
			t.Errorf("Insert(%v) = %v, want ErrInvalidPrefix", p, err)
		}
		if tb.Remove(p, 1) {
			t.Errorf("Remove(%v) reported success", p)
		}
	}
	if tb.Len() != 0 || tb.Prefixes(1) != nil {
		t.Fatal("invalid prefixes changed the table")
	}
	// A zoned address is accepted: netip strips the zone from prefixes.
	must(t, tb.Insert(netip.PrefixFrom(addr("fe80::1%eth0"), 64), 2))
	expect(t, &tb, "fe80::7", 2, true)
}

func TestMoveBetweenOwners(t *testing.T) {
	var tb Table[int]
	must(t, tb.Insert(pfx("10.0.0.0/24"), 1))
	must(t, tb.Insert(pfx("10.0.1.0/24"), 1))
	must(t, tb.Insert(pfx("10.0.0.0/24"), 2)) // moved, not duplicated
	checkInvariants(t, &tb)
	if tb.Len() != 2 {
		t.Fatalf("Len = %d after move, want 2", tb.Len())
	}
	expect(t, &tb, "10.0.0.9", 2, true)
	if got := tb.Prefixes(1); !slices.Equal(got, []netip.Prefix{pfx("10.0.1.0/24")}) {
		t.Fatalf("old owner still lists %v", got)
	}
	if got := tb.Prefixes(2); !slices.Equal(got, []netip.Prefix{pfx("10.0.0.0/24")}) {
		t.Fatalf("new owner lists %v", got)
	}
	if tb.Remove(pfx("10.0.0.0/24"), 1) {
		t.Fatal("former owner removed a moved prefix")
	}
	// Re-inserting for the same owner is a no-op.
	must(t, tb.Insert(pfx("10.0.0.0/24"), 2))
	if tb.Len() != 2 || len(tb.Prefixes(2)) != 1 {
		t.Fatal("re-insert duplicated the prefix")
	}
	checkInvariants(t, &tb)
}

func TestRemove(t *testing.T) {
	var tb Table[int]
	must(t, tb.Insert(pfx("10.0.0.0/8"), 1))
	must(t, tb.Insert(pfx("10.1.0.0/16"), 2))
	must(t, tb.Insert(pfx("10.1.1.0/24"), 3))
	if tb.Remove(pfx("10.1.0.0/16"), 3) {
		t.Fatal("removed a prefix owned by someone else")
	}
	if tb.Remove(pfx("10.2.0.0/16"), 2) {
		t.Fatal("removed a prefix that is not stored")
	}
	if tb.Remove(pfx("10.0.0.0/9"), 1) {
		t.Fatal("removed a glue-only or absent prefix")
	}
	if !tb.Remove(pfx("10.1.0.0/16"), 2) {
		t.Fatal("Remove by owner failed")
	}
	checkInvariants(t, &tb)
	expect(t, &tb, "10.1.2.3", 1, true)
	expect(t, &tb, "10.1.1.3", 3, true)
	if tb.Len() != 2 || tb.Prefixes(2) != nil {
		t.Fatal("removed prefix still counted")
	}
	if _, ok := tb.owned[2]; ok {
		t.Fatal("owner without prefixes keeps a map entry")
	}
}

func TestRemoveAll(t *testing.T) {
	var tb Table[int]
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 3000 {
		must(t, tb.Insert(randPrefix(rng, i%2 == 0), i%10))
	}
	checkInvariants(t, &tb)
	before := tb.Len()
	mine := len(tb.Prefixes(3))
	tb.RemoveAll(3)
	checkInvariants(t, &tb)
	if tb.Prefixes(3) != nil || tb.Len() != before-mine {
		t.Fatalf("RemoveAll left %d of %d, Len %d -> %d", len(tb.Prefixes(3)), mine, before, tb.Len())
	}
	for o := range 10 {
		tb.RemoveAll(o)
	}
	checkInvariants(t, &tb)
	if tb.Len() != 0 || tb.root4 != nil || tb.root6 != nil || len(tb.owned) != 0 {
		t.Fatal("table not empty after removing every owner")
	}
	tb.RemoveAll(42) // unknown owner: no-op
}

// randPrefix draws from a clustered address space so that prefixes nest and
// share long common runs, which is what exercises the glue nodes.
func randPrefix(rng *rand.Rand, v6 bool) netip.Prefix {
	if !v6 {
		a := rng.Uint32() & 0xff0fff0f
		if rng.IntN(2) == 0 {
			a = 0x0a000000 | a&0xffff
		}
		b := [4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}
		return netip.PrefixFrom(netip.AddrFrom4(b), rng.IntN(33)).Masked()
	}
	var b [16]byte
	b[0], b[1] = 0xfd, byte(rng.IntN(4))
	for i := 2; i < 16; i++ {
		if rng.IntN(3) == 0 {
			b[i] = byte(rng.Uint32())
		}
	}
	return netip.PrefixFrom(netip.AddrFrom16(b), rng.IntN(129)).Masked()
}

// randAddrNear returns an address inside or just beside a stored prefix.
func randAddrNear(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		if rng.IntN(4) == 0 {
			b[i] ^= byte(rng.Uint32())
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func TestLookupMatchesBruteForce(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(1, 2))
		var tb Table[int]
		ref := refTable{}
		var stored []netip.Prefix
		for i := range 2000 {
			p := randPrefix(rng, v6)
			must(t, tb.Insert(p, i%37))
			ref[p] = i % 37
			stored = append(stored, p)
		}
		checkInvariants(t, &tb)
		for range 5000 {
			a := randAddrNear(rng, stored[rng.IntN(len(stored))])
			got, ok := tb.Lookup(a)
			want, wantOK := ref.lookup(a)
			if ok != wantOK || got != want {
				t.Fatalf("v6=%v Lookup(%v) = %d, %v; brute force %d, %v", v6, a, got, ok, want, wantOK)
			}
		}
		for o := range 37 {
			if got, want := tb.Prefixes(o), ref.prefixes(o); !slices.Equal(got, want) {
				t.Fatalf("Prefixes(%d) = %v, want %v", o, got, want)
			}
		}
	}
}
