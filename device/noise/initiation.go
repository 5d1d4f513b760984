package noise

import (
	"encoding/binary"
)

// Initiation is the first handshake message, initiator to responder:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  type = 1     |          reserved (zero)                      |  0
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  sender index (little-endian)                 |  4
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            unencrypted ephemeral public key (32)              |  8
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     encrypted static public key (32) + Poly1305 tag (16)      | 40
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     encrypted TAI64N timestamp (12) + Poly1305 tag (16)       | 88
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          MAC1 (16)                            | 116
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          MAC2 (16)                            | 132
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+ 148
type Initiation struct {
	Sender    uint32
	Ephemeral [32]byte
	Static    [32 + TagSize]byte
	Timestamp [TimestampSize + TagSize]byte
	MAC1      [macSize]byte
	MAC2      [macSize]byte
}

// AppendTo appends the InitiationSize-byte encoding of m to b.
func (m *Initiation) AppendTo(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, TypeInitiation)
	b = binary.LittleEndian.AppendUint32(b, m.Sender)
	b = append(b, m.Ephemeral[:]...)
	b = append(b, m.Static[:]...)
	b = append(b, m.Timestamp[:]...)
	b = append(b, m.MAC1[:]...)
	return append(b, m.MAC2[:]...)
}

// ParseInitiation decodes an initiation. b must be exactly InitiationSize
// bytes of type TypeInitiation with zero reserved bytes.
func ParseInitiation(b []byte) (Initiation, error) {
	var m Initiation
	if err := checkMessage(b, TypeInitiation, InitiationSize); err != nil {
		return m, err
	}
	m.Sender = binary.LittleEndian.Uint32(b[4:])
	copy(m.Ephemeral[:], b[8:40])
	copy(m.Static[:], b[40:88])
	copy(m.Timestamp[:], b[88:116])
	copy(m.MAC1[:], b[116:132])
	copy(m.MAC2[:], b[132:148])
	return m, nil
}
