package device

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/obfs"
	"github.com/fips-go/fips-go/device/noise"
)

// Obfuscation is AmneziaWG 1.0's disguise of the wire format, with
// amneziawg-go's parameters (and its UAPI keys, in lower case). The zero
// value is off: the wire is WireGuard's, byte for byte. Both ends must use
// the same values, Jc, Jmin and Jmax excepted (they only shape what a
// sender sends).
type Obfuscation struct {
	// Jc junk datagrams of Jmin to Jmax random bytes go before every
	// handshake initiation (Jc at most 128, Jmax at most 1280).
	Jc, Jmin, Jmax int
	// S1 and S2 random bytes go before each initiation and response
	// (each padded message at most 1280 bytes; the two not of one size).
	S1, S2 int
	// H1 to H4 replace the message types 1 to 4 (initiation, response,
	// cookie reply, transport); 0 keeps the standard type. Once one is
	// set, the standard type it replaces is dropped on receive.
	H1, H2, H3, H4 uint32
}

func (o *Obfuscation) params() obfs.Params {
	return obfs.Params{Jc: o.Jc, Jmin: o.Jmin, Jmax: o.Jmax, S1: o.S1, S2: o.S2,
		H: [4]uint32{o.H1, o.H2, o.H3, o.H4}}.Normalize()
}

func validateObfuscation(o *Obfuscation) error {
	if o == nil {
		return nil
	}
	p := o.params()
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// setObfuscation installs o; called by Apply after validation.
func (d *Device) setObfuscation(o *Obfuscation) {
	p := o.params()
	if !p.On() {
		d.obfs.Store(nil)
		return
	}
	d.obfs.Store(&p)
}

func (d *Device) obfuscationStatus() Obfuscation {
	p := d.obfs.Load()
	if p == nil {
		return Obfuscation{}
	}
	return Obfuscation{Jc: p.Jc, Jmin: p.Jmin, Jmax: p.Jmax, S1: p.S1, S2: p.S2,
		H1: p.H[0], H2: p.H[1], H3: p.H[2], H4: p.H[3]}
}

// unwrap classifies a received datagram under ob (nil: off). It returns the
// standard type and the message without its padding, its type word still
// the configured one (the handshake MACs cover it). A transport message
// gets its standard type word back in place for the transport parser,
// which checks no MAC. ok is false for junk and anything malformed.
func unwrap(ob *obfs.Params, msg []byte) (typ uint32, out []byte, ok bool) {
	if ob == nil {
		return noise.PeekType(msg), msg, true
	}
	typ, off, ok := ob.Classify(msg)
	if !ok {
		return 0, nil, false
	}
	msg = msg[off:]
	if typ == noise.TypeTransport {
		obfs.Standard(msg, typ)
	}
	return typ, msg, true
}

// standardType is the standard type of a queued handshake message's type
// word, and false when the current parameters do not know the word (they
// changed after the message was queued).
func (d *Device) standardType(w uint32) (uint32, bool) {
	ob := d.obfs.Load()
	if ob == nil {
		return w, true
	}
	return ob.StandardType(w)
}

// wrapHandshake lays out a handshake message of standard type typ into
// dst, padding first, and returns dst and the message within it, whose
// type word is the configured one, so that the MACs added next cover it as
// the peer checks them.
func wrapHandshake(ob *obfs.Params, typ uint32, dst []byte, rand io.Reader, appendMsg func([]byte) []byte) (out, msg []byte, err error) {
	pad := 0
	if ob != nil {
		pad = ob.Padding(typ)
	}
	start := len(dst)
	dst = append(dst, make([]byte, pad)...)
	if _, err := io.ReadFull(rand, dst[start:start+pad]); err != nil {
		return nil, nil, err
	}
	dst = appendMsg(dst)
	msg = dst[start+pad:]
	if ob != nil {
		ob.SetType(msg, typ)
	}
	return dst, msg, nil
}

// sendJunk sends the junk datagrams that precede an initiation to ep.
// Failures are not the handshake's: the initiation goes out regardless.
func (d *Device) sendJunk(ob *obfs.Params, ep conn.Endpoint) {
	if ob == nil || ob.Jc == 0 {
		return
	}
	sizes := make([]byte, 4*ob.Jc)
	if _, err := io.ReadFull(d.opts.Rand, sizes); err != nil {
		return
	}
	junk := make([][]byte, ob.Jc)
	for i := range junk {
		junk[i] = make([]byte, ob.JunkSize(binary.LittleEndian.Uint32(sizes[4*i:])))
		if _, err := io.ReadFull(d.opts.Rand, junk[i]); err != nil {
			return
		}
	}
	if d.send(junk, ep) != nil {
		d.ctr.inc(cTxSendErrors)
	}
}

// transportType is the type word sealed transport messages carry.
func (d *Device) transportType() uint32 {
	if ob := d.obfs.Load(); ob != nil {
		return ob.Type(noise.TypeTransport)
	}
	return noise.TypeTransport
}
