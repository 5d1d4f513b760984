package noise

import "encoding/binary"

// Response is the second handshake message, responder to initiator:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  type = 2     |          reserved (zero)                      |  0
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  sender index (little-endian)                 |  4
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   receiver index (little-endian): the initiation's sender     |  8
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            unencrypted ephemeral public key (32)              | 12
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        encrypted nothing: a Poly1305 tag alone (16)           | 44
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          MAC1 (16)                            | 60
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          MAC2 (16)                            | 76
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+ 92
type Response struct {
	Sender, Receiver uint32
	Ephemeral        [32]byte
	Empty            [TagSize]byte
	MAC1, MAC2       [macSize]byte
}

// AppendTo appends the ResponseSize-byte encoding of m to b.
func (m *Response) AppendTo(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, TypeResponse)
	b = binary.LittleEndian.AppendUint32(b, m.Sender)
	b = binary.LittleEndian.AppendUint32(b, m.Receiver)
	b = append(b, m.Ephemeral[:]...)
	b = append(b, m.Empty[:]...)
	b = append(b, m.MAC1[:]...)
	return append(b, m.MAC2[:]...)
}

// ParseResponse decodes a response. b must be exactly ResponseSize bytes of
// type TypeResponse with zero reserved bytes.
func ParseResponse(b []byte) (Response, error) {
	var m Response
	if err := checkMessage(b, TypeResponse, ResponseSize); err != nil {
		return m, err
	}
	m.Sender = binary.LittleEndian.Uint32(b[4:])
	m.Receiver = binary.LittleEndian.Uint32(b[8:])
	copy(m.Ephemeral[:], b[12:44])
	copy(m.Empty[:], b[44:60])
	copy(m.MAC1[:], b[60:76])
	copy(m.MAC2[:], b[76:92])
	return m, nil
}
