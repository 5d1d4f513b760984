// Package allowedips maps IP prefixes to their owning peer and answers
// longest-prefix-match queries, for routing outgoing packets to a peer and
// checking the source address of incoming ones.
//
// Each address family has its own path-compressed binary trie (a PATRICIA
// tree): a node exists only where a prefix is stored or where two stored
// prefixes diverge, so a table of n prefixes has fewer than 2n nodes and a
// lookup visits at most one node per stored prefix length on its path.
// Every owner also keeps an intrusive list of its nodes so that removing a
// peer with many prefixes does not scan the whole table.
package allowedips

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"

	"github.com/fips-go/fips-go/internal/packet"
)

// ErrInvalidPrefix is returned by Insert for a prefix that netip considers
// invalid (the zero Prefix, or a length outside the address family's range).
var ErrInvalidPrefix = errors.New("allowedips: invalid prefix")

// Table maps prefixes to owners of type T (a peer pointer in the device).
// The zero value is an empty table ready for use.
//
// Owners are compared with == and used as map keys, so T must be comparable
// at run time too (no interface values holding slices, no NaN floats).
//
// Table is not safe for concurrent use: the device guards it with an
// RWMutex, and every method here that does not modify the table (Lookup*,
// Prefixes, Len) is safe under a read lock.
type Table[T comparable] struct {
	root4, root6 *node[T]
	// owned maps each owner to the head of its list of nodes. An owner
	// with no prefix left has no entry, so the map stays bounded by the
	// number of prefixes.
	owned map[T]*node[T]
	count int
}

// Insert stores p for owner v, masking p's host bits first. If p is already
// stored for another owner it is moved to v, since one prefix can route to
// only one peer. An invalid prefix is rejected with ErrInvalidPrefix and the
// table is left unchanged.
//
// IPv4-mapped IPv6 prefixes (::ffff:a.b.c.d/n) are stored as IPv6 as given;
// they never match plain IPv4 addresses.
func (t *Table[T]) Insert(p netip.Prefix, v T) error {
	if !p.IsValid() {
		return ErrInvalidPrefix
	}
	k, bits, is6 := prefixKey(p)
	n := t.insert(t.rootOf(is6), k, bits, is6)
	t.setOwner(n, v)
	return nil
}

// Remove deletes p (host bits masked) if and only if v owns it, and
// reports whether it did. A prefix owned by someone else is left alone so
// that a stale removal for one peer cannot cut off another.
func (t *Table[T]) Remove(p netip.Prefix, v T) bool {
	if !p.IsValid() {
		return false
	}
	k, bits, is6 := prefixKey(p)
	n := find(*t.rootOf(is6), k, bits)
	if n == nil || !n.hasValue || n.value != v {
		return false
	}
	t.clearValue(n)
	return true
}

// RemoveAll deletes every prefix owned by v. It costs time proportional to
// the number of v's prefixes, not to the size of the table.
func (t *Table[T]) RemoveAll(v T) {
	n := t.owned[v]
	for n != nil {
		next := n.nextOwned
		t.clearValue(n)
		n = next
	}
}

// Lookup returns the owner of the longest stored prefix containing a. An
// IPv4-mapped IPv6 address is looked up as IPv6; it is not unmapped. The
// zero Addr matches nothing. Lookup does not allocate.
func (t *Table[T]) Lookup(a netip.Addr) (T, bool) {
	switch {
	case a.Is4():
		b := a.As4()
		return lookup(t.root4, key4(b[:]))
	case a.Is6():
		b := a.As16()
		return lookup(t.root6, key6(b[:]))
	}
	var zero T
	return zero, false
}

// LookupPacketDst looks up the destination address of the IPv4 or IPv6
// packet pkt, chosen by the version nibble. It reports false for a packet
// too short to hold the header's addresses or of any other version. It
// does not allocate.
func (t *Table[T]) LookupPacketDst(pkt []byte) (T, bool) {
	return t.lookupPacket(pkt, true)
}

// LookupPacketSrc is LookupPacketDst for the source address, used on the
// receive path to check that a peer only sends from its allowed IPs.
func (t *Table[T]) LookupPacketSrc(pkt []byte) (T, bool) {
	return t.lookupPacket(pkt, false)
}

// lookupPacket looks up pkt's destination (dst) or source address. The
// addresses lie within the fixed IPv4 and IPv6 headers, so no options or
// extension headers need walking.
func (t *Table[T]) lookupPacket(pkt []byte, dst bool) (T, bool) {
	switch packet.Version(pkt) {
	case 4:
		if len(pkt) >= packet.IPv4HeaderLen {
			ip := packet.IPv4Header(pkt)
			a := ip.Src()
			if dst {
				a = ip.Dst()
			}
			return lookup(t.root4, key4(a))
		}
	case 6:
		if len(pkt) >= packet.IPv6HeaderLen {
			ip := packet.IPv6Header(pkt)
			a := ip.Src()
			if dst {
				a = ip.Dst()
			}
			return lookup(t.root6, key6(a))
		}
	}
	var zero T
	return zero, false
}

// Prefixes returns v's prefixes sorted IPv4 first, then by address, then by
// length. It returns nil if v owns none.
func (t *Table[T]) Prefixes(v T) []netip.Prefix {
	var out []netip.Prefix
	for n := t.owned[v]; n != nil; n = n.nextOwned {
		out = append(out, n.prefix())
	}
	slices.SortFunc(out, netip.Prefix.Compare)
	return out
}

// Len returns the number of stored prefixes.
func (t *Table[T]) Len() int {
	return t.count
}

func (t *Table[T]) rootOf(is6 bool) **node[T] {
	if is6 {
		return &t.root6
	}
	return &t.root4
}

// setOwner gives the valued or glue node n to v, unlinking it from a
// previous owner's list.
func (t *Table[T]) setOwner(n *node[T], v T) {
	if n.hasValue {
		if n.value == v {
			return
		}
		t.unlinkOwner(n)
	} else {
		t.count++
	}
	n.hasValue = true
	n.value = v
	if t.owned == nil {
		t.owned = make(map[T]*node[T])
	}
	head := t.owned[v]
	n.prevOwned, n.nextOwned = nil, head
	if head != nil {
		head.prevOwned = n
	}
	t.owned[v] = n
}

// unlinkOwner removes n from its owner's list, deleting the owner's map
// entry when the list becomes empty.
func (t *Table[T]) unlinkOwner(n *node[T]) {
	if n.prevOwned != nil {
		n.prevOwned.nextOwned = n.nextOwned
	} else if n.nextOwned != nil {
		t.owned[n.value] = n.nextOwned
	} else {
		delete(t.owned, n.value)
	}
	if n.nextOwned != nil {
		n.nextOwned.prevOwned = n.prevOwned
	}
	n.prevOwned, n.nextOwned = nil, nil
}

// clearValue drops n's prefix and removes the nodes that are no longer
// needed to keep the trie compressed.
func (t *Table[T]) clearValue(n *node[T]) {
	t.unlinkOwner(n)
	var zero T
	n.value = zero // do not keep a removed peer reachable
	n.hasValue = false
	t.count--
	t.prune(n)
}

// prefixKey converts a valid prefix into its masked key, length and family.
func prefixKey(p netip.Prefix) (key, uint8, bool) {
	p = p.Masked()
	a := p.Addr()
	if a.Is4() {
		b := a.As4()
		return key4(b[:]), uint8(p.Bits()), false
	}
	b := a.As16()
	return key6(b[:]), uint8(p.Bits()), true
}

// key4 builds the key of a 4-byte big-endian IPv4 address; the address
// occupies the top 32 bits so that bit numbering is the same as for IPv6.
func key4(b []byte) key {
	return key{hi: uint64(binary.BigEndian.Uint32(b)) << 32}
}

// key6 builds the key of a 16-byte big-endian IPv6 address.
func key6(b []byte) key {
	return key{hi: binary.BigEndian.Uint64(b), lo: binary.BigEndian.Uint64(b[8:])}
}
