package allowedips

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// key is an address as a 128-bit big-endian number. Bit 0 is the most
// significant bit of hi. IPv4 addresses use bits 0..31.
type key struct {
	hi, lo uint64
}

// bitAt returns bit i of k. For i >= 128 it returns 0: the shift count then
// exceeds the word width, which Go defines as yielding 0.
func (k key) bitAt(i uint8) uint8 {
	if i < 64 {
		return uint8(k.hi >> (63 - i) & 1)
	}
	return uint8(k.lo >> (127 - uint(i)) & 1)
}

// masks returns the network masks of a prefix of length n (0..128).
func masks(n uint8) (hi, lo uint64) {
	if n <= 64 {
		return ^uint64(0) << (64 - n), 0
	}
	return ^uint64(0), ^uint64(0) << (128 - n)
}

func (k key) masked(n uint8) key {
	mh, ml := masks(n)
	return key{hi: k.hi & mh, lo: k.lo & ml}
}

// commonLen returns how many leading bits a and b share, at most limit.
func commonLen(a, b key, limit uint8) uint8 {
	var n int
	if x := a.hi ^ b.hi; x != 0 {
		n = bits.LeadingZeros64(x)
	} else {
		n = 64 + bits.LeadingZeros64(a.lo^b.lo)
	}
	return uint8(min(n, int(limit)))
}

// node is a trie node. A node either holds a prefix (hasValue) or is a
// glue node where two subtrees diverge; a glue node always has two
// children, and a leaf always holds a prefix. prune keeps it that way.
type node[T comparable] struct {
	child  [2]*node[T]
	parent *node[T]
	key    key // masked to bits
	bits   uint8
	is6    bool

	hasValue bool
	value    T
	// prevOwned and nextOwned link the nodes of one owner (valued nodes
	// only), so that RemoveAll visits just that owner's prefixes.
	prevOwned, nextOwned *node[T]
}

// contains reports whether k lies inside n's prefix.
func (n *node[T]) contains(k key) bool {
	mh, ml := masks(n.bits)
	return (k.hi^n.key.hi)&mh == 0 && (k.lo^n.key.lo)&ml == 0
}

func (n *node[T]) prefix() netip.Prefix {
	if !n.is6 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(n.key.hi>>32))
		return netip.PrefixFrom(netip.AddrFrom4(b), int(n.bits))
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], n.key.hi)
	binary.BigEndian.PutUint64(b[8:], n.key.lo)
	return netip.PrefixFrom(netip.AddrFrom16(b), int(n.bits))
}

// lookup walks down from n along k and returns the value of the deepest
// valued node containing k. Children always have longer prefixes than
// their parent, so the last match is the longest.
func lookup[T comparable](n *node[T], k key) (T, bool) {
	var best *node[T]
	for n != nil && n.contains(k) {
		if n.hasValue {
			best = n
		}
		n = n.child[k.bitAt(n.bits)]
	}
	if best == nil {
		var zero T
		return zero, false
	}
	return best.value, true
}

// find returns the node for exactly k/bits, valued or glue, or nil.
func find[T comparable](n *node[T], k key, bits uint8) *node[T] {
	for n != nil && n.bits <= bits && n.contains(k) {
		if n.bits == bits {
			return n
		}
		n = n.child[k.bitAt(n.bits)]
	}
	return nil
}

// insert returns the node for k/bits under *root, creating it (and a glue
// node if the new prefix diverges from an existing one) if needed. The
// returned node may be a glue node; the caller gives it a value.
func (t *Table[T]) insert(root **node[T], k key, bits uint8, is6 bool) *node[T] {
	slot := root
	var parent *node[T]
	for {
		n := *slot
		if n == nil {
			n = &node[T]{key: k, bits: bits, is6: is6, parent: parent}
			*slot = n
			return n
		}
		common := commonLen(n.key, k, min(n.bits, bits))
		if common == n.bits {
			if n.bits == bits {
				return n
			}
			parent, slot = n, &n.child[k.bitAt(n.bits)]
			continue
		}
		fresh := &node[T]{key: k, bits: bits, is6: is6}
		if common == bits {
			// The new prefix contains n: it takes n's place, n below it.
			fresh.parent = parent
			fresh.child[n.key.bitAt(bits)] = n
			n.parent = fresh
			*slot = fresh
			return fresh
		}
		glue := &node[T]{key: k.masked(common), bits: common, is6: is6, parent: parent}
		glue.child[k.bitAt(common)] = fresh
		glue.child[n.key.bitAt(common)] = n
		fresh.parent, n.parent = glue, glue
		*slot = glue
		return fresh
	}
}

// slotOf returns the pointer that refers to n: its parent's child slot or
// the family root.
func (t *Table[T]) slotOf(n *node[T]) **node[T] {
	if n.parent == nil {
		return t.rootOf(n.is6)
	}
	return &n.parent.child[n.key.bitAt(n.parent.bits)]
}

// prune removes the valueless node n if it no longer separates two
// subtrees. Removing a leaf can leave its glue parent with one child, so
// that parent is pruned too; it cannot cascade further because the parent
// is then replaced by its remaining child, which keeps every ancestor's
// child count.
func (t *Table[T]) prune(n *node[T]) {
	for n != nil && !n.hasValue {
		c0, c1 := n.child[0], n.child[1]
		if c0 != nil && c1 != nil {
			return
		}
		only := c0
		if only == nil {
			only = c1
		}
		parent := n.parent
		*t.slotOf(n) = only
		if only != nil {
			only.parent = parent
		}
		n.parent, n.child = nil, [2]*node[T]{}
		if only != nil {
			return
		}
		n = parent
	}
}
