// Package peerstate is the format of the file in which a device remembers
// where its recently active peers were, so that the next process can
// start their sessions itself instead of waiting for them. It holds
// nothing secret: a peer is named by a hash of its public key, and no key
// or session state is written.
//
// Layout (big endian):
//
//	0       4        5        8                16           20
//	+-------+--------+--------+----------------+------------+
//	| "fgps"| ver=1  | zero   | written (unix) | count      |
//	+-------+--------+--------+----------------+------------+
//	count entries of 42 bytes:
//	+-----------+----------------------+--------+----------------------+
//	| key id 16 | address 16 (v4 in v6)| port 2 | last active (unix) 8 |
//	+-----------+----------------------+--------+----------------------+
//	+--------------------------------+
//	| CRC-32 (IEEE) of all the above |
//	+--------------------------------+
//
// Bytes after the checksum are ignored: a file rewritten in place with a
// shorter content keeps the old tail until it is truncated.
package peerstate

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
)

// MaxEntries bounds the file: the most peers it remembers (a device with
// more recently active peers remembers the first MaxEntries it lists).
const MaxEntries = 100_000

const (
	headerLen = 20
	entryLen  = 42
	sumLen    = 4
	version   = 1
)

// MaxSize is the largest file Parse reads.
const MaxSize = headerLen + MaxEntries*entryLen + sumLen

var magic = [4]byte{'f', 'g', 'p', 's'}

// ErrInvalid is wrapped by every Parse error.
var ErrInvalid = errors.New("peerstate: invalid file")

// KeyID names a peer by its public key without writing the key.
type KeyID [16]byte

// IDOf returns the KeyID of a public key.
func IDOf(pub [32]byte) KeyID {
	h := sha256.Sum256(append([]byte("fips-go peerstate v1 "), pub[:]...))
	return KeyID(h[:16])
}

// Entry is one remembered peer.
type Entry struct {
	ID       KeyID
	Endpoint netip.AddrPort
	// LastActive is when the peer last sent us an authenticated packet,
	// in Unix seconds.
	LastActive int64
}

// Append appends the encoding of entries written at written (Unix
// seconds) to dst. It fails for more than MaxEntries entries.
func Append(dst []byte, written int64, entries []Entry) ([]byte, error) {
	if len(entries) > MaxEntries {
		return dst, fmt.Errorf("peerstate: %d entries, at most %d", len(entries), MaxEntries)
	}
	start := len(dst)
	dst = append(dst, magic[:]...)
	dst = append(dst, version, 0, 0, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(written))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = append(dst, e.ID[:]...)
		a := e.Endpoint.Addr().As16()
		dst = append(dst, a[:]...)
		dst = binary.BigEndian.AppendUint16(dst, e.Endpoint.Port())
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastActive))
	}
	return binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:])), nil
}

// Parse decodes a file. Entries whose endpoint is unusable (no port, an
// unspecified address) are dropped.
func Parse(b []byte) (written int64, entries []Entry, err error) {
	if len(b) < headerLen+sumLen {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrInvalid, len(b))
	}
	if [4]byte(b[:4]) != magic || b[4] != version {
		return 0, nil, fmt.Errorf("%w: not a version %d state file", ErrInvalid, version)
	}
	written = int64(binary.BigEndian.Uint64(b[8:]))
	n := binary.BigEndian.Uint32(b[16:])
	if n > MaxEntries {
		return 0, nil, fmt.Errorf("%w: %d entries", ErrInvalid, n)
	}
	end := headerLen + int(n)*entryLen
	if len(b) < end+sumLen {
		return 0, nil, fmt.Errorf("%w: truncated", ErrInvalid)
	}
	if crc32.ChecksumIEEE(b[:end]) != binary.BigEndian.Uint32(b[end:]) {
		return 0, nil, fmt.Errorf("%w: checksum mismatch", ErrInvalid)
	}
	entries = make([]Entry, 0, n)
	for off := headerLen; off < end; off += entryLen {
		e := b[off : off+entryLen]
		addr := netip.AddrFrom16([16]byte(e[16:32])).Unmap()
		ap := netip.AddrPortFrom(addr, binary.BigEndian.Uint16(e[32:34]))
		if ap.Port() == 0 || addr.IsUnspecified() {
			continue
		}
		entries = append(entries, Entry{
			ID:         KeyID(e[:16]),
			Endpoint:   ap,
			LastActive: int64(binary.BigEndian.Uint64(e[34:42])),
		})
	}
	return written, entries, nil
}
