package sockowner

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

// A /proc/net/udp as a little-endian kernel writes it: a socket of uid
// 1000 bound to 127.0.0.1:8080, one of uid 65534 on 0.0.0.0:5353, one of
// uid 1000 connected from 127.0.0.1:40000 to 127.0.0.1:9000.
const procUDP = `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  1: 0100007F:1F90 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 4242 2 0000000000000000 0
  2: 00000000:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000 65534        0 4343 2 0000000000000000 0
  3: 0100007F:9C40 0100007F:2328 01 00000000:00000000 00:00000000 00000000  1000        0 4444 2 0000000000000000 0
garbage line
  4: 0100007F:ZZZZ 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 4545 2 0000000000000000 0
`

// A /proc/net/udp6 line: uid 1001 on [::]:8080, and a TCP6 line for a
// v4-mapped connection 127.0.0.1:50000 -> 127.0.0.1:1080 of uid 1002.
const procUDP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
    5: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000  1001        0 99 2 0000000000000000 0
`
const procTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
    0: 0000000000000000FFFF00000100007F:C350 0000000000000000FFFF00000100007F:0438 01 00000000:00000000 00:00000000 00000000  1002        0 77 1 0000000000000000 20 4 30 10 -1
    1: 0000000000000000FFFF00000100007F:C351 0000000000000000FFFF00000100007F:0438 06 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
`

func TestParseProcNet(t *testing.T) {
	e := parseProcNet(procUDP, binary.LittleEndian)
	if len(e) != 3 {
		t.Fatalf("%d entries, want 3 (the bad lines skipped): %+v", len(e), e)
	}
	if e[0].local != netip.MustParseAddrPort("127.0.0.1:8080") || e[0].uid != 1000 || e[0].state != 7 {
		t.Errorf("first entry %+v", e[0])
	}
	if e[2].remote != netip.MustParseAddrPort("127.0.0.1:9000") {
		t.Errorf("third entry %+v", e[2])
	}
	e6 := parseProcNet(procTCP6, binary.LittleEndian)
	if len(e6) != 2 || e6[0].local != netip.MustParseAddrPort("127.0.0.1:50000") || e6[0].uid != 1002 {
		t.Errorf("tcp6 entries %+v", e6)
	}
}

func TestOwnerIn(t *testing.T) {
	udp := parseProcNet(procUDP, binary.LittleEndian)
	relay := netip.MustParseAddrPort("127.0.0.1:1234")
	for _, tc := range []struct {
		self, peer string
		uid        uint32
		err        error
	}{
		{"127.0.0.1:8080", relay.String(), 1000, nil},
		{"127.0.0.2:5353", relay.String(), 65534, nil},         // bound to 0.0.0.0
		{"127.0.0.1:40000", "127.0.0.1:9000", 1000, nil},       // connected to the peer
		{"127.0.0.1:40000", relay.String(), 0, ErrNotFound},    // connected elsewhere
		{"127.0.0.1:9999", relay.String(), 0, ErrNotFound},     // no such port
		{"[::ffff:127.0.0.1]:8080", relay.String(), 1000, nil}, // mapped is the same
	} {
		uid, err := ownerIn(udp, UDP, netip.MustParseAddrPort(tc.self), netip.MustParseAddrPort(tc.peer))
		if uid != tc.uid || !errors.Is(err, tc.err) {
			t.Errorf("udp %s<-%s: %d, %v; want %d, %v", tc.self, tc.peer, uid, err, tc.uid, tc.err)
		}
	}
	// Two users could receive on port 8080: no single owner.
	both := append(udp, parseProcNet(procUDP6, binary.LittleEndian)...)
	if _, err := ownerIn(both, UDP, netip.MustParseAddrPort("127.0.0.1:8080"), relay); !errors.Is(err, ErrNotFound) {
		t.Errorf("8080 shared by uids 1000 and 1001: %v, want ErrNotFound", err)
	}
	tcp := parseProcNet(procTCP6, binary.LittleEndian)
	if uid, err := ownerIn(tcp, TCP, netip.MustParseAddrPort("127.0.0.1:50000"), netip.MustParseAddrPort("127.0.0.1:1080")); uid != 1002 || err != nil {
		t.Errorf("tcp: %d, %v; want 1002", uid, err)
	}
	if _, err := ownerIn(tcp, TCP, netip.MustParseAddrPort("127.0.0.1:50001"), netip.MustParseAddrPort("127.0.0.1:1080")); !errors.Is(err, ErrNotFound) {
		t.Errorf("tcp TIME_WAIT: %v, want ErrNotFound", err)
	}
}

func TestDiagRequestLayout(t *testing.T) {
	self, peer := netip.MustParseAddrPort("127.0.0.1:50000"), netip.MustParseAddrPort("127.0.0.2:1080")
	b := appendDiagRequest(nil, TCP, self, peer, 7, binary.LittleEndian)
	if len(b) != nlHeaderLen+diagReqLen || binary.LittleEndian.Uint32(b) != uint32(len(b)) {
		t.Fatalf("request of %d bytes: %x", len(b), b)
	}
	id := b[nlHeaderLen+8:]
	if b[nlHeaderLen] != afInet || b[nlHeaderLen+1] != 6 || binary.BigEndian.Uint16(id) != 50000 || id[4] != 127 || id[23] != 2 {
		t.Errorf("tcp request %x", b)
	}
	u := appendDiagRequest(nil, UDP, self, peer, 7, binary.LittleEndian)[nlHeaderLen+8:]
	if binary.BigEndian.Uint16(u) != 1080 || binary.BigEndian.Uint16(u[2:]) != 50000 {
		t.Errorf("udp request puts the socket's own address in the id's destination: %x", u)
	}
	v6 := appendDiagRequest(nil, UDP, netip.MustParseAddrPort("[::1]:1"), peer, 7, binary.LittleEndian)
	if v6[nlHeaderLen] != afInet6 || v6[nlHeaderLen+8+4+10] != 0xff {
		t.Errorf("mixed families are asked as IPv6 with a mapped address: %x", v6)
	}
}

func TestParseDiagReply(t *testing.T) {
	le := binary.LittleEndian
	msg := le.AppendUint32(nil, nlHeaderLen+diagMsgLen)
	msg = le.AppendUint16(msg, sockDiagByFam)
	msg = le.AppendUint16(msg, 0)
	msg = le.AppendUint32(msg, 9)
	msg = le.AppendUint32(msg, 0)
	body := make([]byte, diagMsgLen)
	le.PutUint32(body[diagMsgUID:], 1000)
	msg = append(msg, body...)
	if uid, err := parseDiagReply(msg, 9, le); uid != 1000 || err != nil {
		t.Errorf("reply: %d, %v", uid, err)
	}
	if _, err := parseDiagReply(msg, 8, le); !errors.Is(err, errOtherSeq) {
		t.Errorf("another sequence: %v", err)
	}
	if _, err := parseDiagReply(msg[:40], 9, le); err == nil {
		t.Error("a truncated reply parsed")
	}
	nack := le.AppendUint32(nil, nlHeaderLen+4)
	nack = le.AppendUint16(nack, nlmsgError)
	nack = le.AppendUint16(nack, 0)
	nack = le.AppendUint32(nack, 9)
	nack = le.AppendUint32(nack, 0)
	nack = le.AppendUint32(nack, uint32(0xfffffffe)) // -ENOENT
	if _, err := parseDiagReply(nack, 9, le); !errors.Is(err, ErrNotFound) {
		t.Errorf("ENOENT: %v", err)
	}
}

func FuzzParsers(f *testing.F) {
	f.Add(procUDP, []byte{})
	f.Add(procTCP6, []byte{72, 0, 0, 0, 20, 0})
	f.Fuzz(func(t *testing.T, text string, reply []byte) {
		for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			e := parseProcNet(text, o)
			ownerIn(e, UDP, netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2"))
			ownerIn(e, TCP, netip.MustParseAddrPort("[::1]:1"), netip.MustParseAddrPort("[::1]:2"))
			parseDiagReply(reply, 0, o)
			parseDiagDump(reply, 0, o)
		}
	})
}

func TestParseDiagDump(t *testing.T) {
	le := binary.LittleEndian
	msg := func(typ uint16, seq uint32, body []byte) []byte {
		b := le.AppendUint32(nil, uint32(nlHeaderLen+len(body)))
		b = le.AppendUint16(b, typ)
		b = le.AppendUint16(b, 0)
		b = le.AppendUint32(b, seq)
		b = le.AppendUint32(b, 0)
		return append(b, body...)
	}
	sock := func(family byte, local, remote string, uid uint32) []byte {
		m := make([]byte, diagMsgLen)
		m[0] = family
		l, r := netip.MustParseAddrPort(local), netip.MustParseAddrPort(remote)
		binary.BigEndian.PutUint16(m[4:], l.Port())
		binary.BigEndian.PutUint16(m[6:], r.Port())
		copy(m[8:], l.Addr().AsSlice())
		copy(m[24:], r.Addr().AsSlice())
		le.PutUint32(m[diagMsgUID:], uid)
		return m
	}
	var b []byte
	b = append(b, msg(sockDiagByFam, 5, sock(afInet, "127.0.0.1:53", "0.0.0.0:0", 1000))...)
	b = append(b, msg(sockDiagByFam, 4, sock(afInet, "127.0.0.1:54", "0.0.0.0:0", 7))...) // another request
	b = append(b, msg(sockDiagByFam, 5, sock(afInet6, "[::ffff:127.0.0.1]:53", "[::]:0", 65534))...)
	got, done, err := parseDiagDump(b, 5, le)
	if err != nil || done || len(got) != 2 {
		t.Fatalf("dump: %v, done %v, %v", got, done, err)
	}
	want := procEntry{local: netip.MustParseAddrPort("127.0.0.1:53"), remote: netip.MustParseAddrPort("[::]:0"), uid: 65534}
	if got[1] != want {
		t.Errorf("the IPv6 socket: %+v, want %+v", got[1], want)
	}
	// Both are on the port: no single owner.
	if _, err := ownerIn(got, UDP, netip.MustParseAddrPort("127.0.0.1:53"), netip.MustParseAddrPort("127.0.0.1:9")); !errors.Is(err, ErrNotFound) {
		t.Errorf("two owners: %v", err)
	}
	if _, done, err := parseDiagDump(msg(nlmsgDone, 5, make([]byte, 4)), 5, le); !done || err != nil {
		t.Errorf("done: %v, %v", done, err)
	}
	if _, _, err := parseDiagDump(msg(nlmsgError, 5, le.AppendUint32(nil, uint32(0xffffffff))), 5, le); err == nil {
		t.Error("an error message parsed")
	}
	if _, _, err := parseDiagDump(b[:30], 5, le); err == nil {
		t.Error("a truncated message parsed")
	}
}
