package noise

import "encoding/binary"

// CookieReply answers a handshake message when the responder is under load:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  type = 3     |          reserved (zero)                      |  0
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  receiver index (little-endian): the handshake's sender       |  4
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   random XChaCha20 nonce (24)                 |  8
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      encrypted cookie (16) + Poly1305 tag (16); the AD is     | 32
//	|      the MAC1 of the message being answered                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+ 64
type CookieReply struct {
	Receiver uint32
	Nonce    [24]byte
	Cookie   [macSize + TagSize]byte
}

// AppendTo appends the CookieReplySize-byte encoding of m to b.
func (m *CookieReply) AppendTo(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, TypeCookieReply)
	b = binary.LittleEndian.AppendUint32(b, m.Receiver)
	b = append(b, m.Nonce[:]...)
	return append(b, m.Cookie[:]...)
}

// ParseCookieReply decodes a cookie reply. b must be exactly CookieReplySize
// bytes of type TypeCookieReply with zero reserved bytes.
func ParseCookieReply(b []byte) (CookieReply, error) {
	var m CookieReply
	if err := checkMessage(b, TypeCookieReply, CookieReplySize); err != nil {
		return m, err
	}
	m.Receiver = binary.LittleEndian.Uint32(b[4:])
	copy(m.Nonce[:], b[8:32])
	copy(m.Cookie[:], b[32:64])
	return m, nil
}
