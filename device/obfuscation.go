package device

import (
	"encoding/binary"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/obfs"
	"github.com/fips-go/fips-go/device/noise"
)

// Obfuscation is AmneziaWG's disguise of the wire format (versions 1.0 and
// 2.0), with amneziawg-go's parameters (and its UAPI keys, in lower case).
// The zero value is off: the wire is WireGuard's, byte for byte. Both ends
// must use the same S and H values; Jc, Jmin, Jmax and I1 to I5 only shape
// what a sender sends.
type Obfuscation struct {
	// Jc junk datagrams of Jmin to Jmax random bytes go before every
	// handshake initiation (Jc at most 128, Jmax at most 1280).
	Jc, Jmin, Jmax int
	// S1, S2 and S3 random bytes go before each initiation, response and
	// cookie reply (each padded message at most 1280 bytes; no two of one
	// size), S4 (at most 256) before each transport message, which makes
	// every data datagram S4 bytes longer: lower the tunnel MTU by S4.
	S1, S2, S3, S4 int
	// H1 to H4 replace the message types 1 to 4 (initiation, response,
	// cookie reply, transport); 0 keeps the standard type. HnMax, when not
	// 0, makes Hn a range Hn..HnMax, from which each message's type is
	// drawn at random. Once one is set, the standard type it replaces is
	// dropped on receive; the four ranges must not overlap.
	H1, H2, H3, H4             uint32
	H1Max, H2Max, H3Max, H4Max uint32
	// I1 to I5 are signature packets sent, in order, before the junk that
	// precedes an initiation, in amneziawg-go's tag language ("<b 0x1234>
	// <r 16> <t>"); "" sends none.
	I1, I2, I3, I4, I5 string
	// HeaderProtectionKey, when not zero, masks every message's header
	// with a keystream under this key, as amneziawg-go 3.x does with its
	// header_protection_key (both ends need it; S1 to S4 must then be at
	// least 12: the padding is the keystream's nonce).
	HeaderProtectionKey [32]byte
}

func (o *Obfuscation) params() obfs.Params {
	rng := func(lo, hi uint32) obfs.Range {
		if hi == 0 {
			hi = lo
		}
		return obfs.Range{Lo: lo, Hi: hi}
	}
	return obfs.Params{Jc: o.Jc, Jmin: o.Jmin, Jmax: o.Jmax, S1: o.S1, S2: o.S2, S3: o.S3, S4: o.S4,
		H: [4]obfs.Range{rng(o.H1, o.H1Max), rng(o.H2, o.H2Max), rng(o.H3, o.H3Max), rng(o.H4, o.H4Max)},
		I: [5]string{o.I1, o.I2, o.I3, o.I4, o.I5}, HeaderKey: o.HeaderProtectionKey}.Normalize()
}

// copyObfsKey copies the parameter named by key, one of amneziawg-go's
// UAPI keys, from src to dst; false when key names none.
func copyObfsKey(dst, src *Obfuscation, key string) bool {
	switch key {
	case "jc":
		dst.Jc = src.Jc
	case "jmin":
		dst.Jmin = src.Jmin
	case "jmax":
		dst.Jmax = src.Jmax
	case "s1":
		dst.S1 = src.S1
	case "s2":
		dst.S2 = src.S2
	case "s3":
		dst.S3 = src.S3
	case "s4":
		dst.S4 = src.S4
	case "h1":
		dst.H1, dst.H1Max = src.H1, src.H1Max
	case "h2":
		dst.H2, dst.H2Max = src.H2, src.H2Max
	case "h3":
		dst.H3, dst.H3Max = src.H3, src.H3Max
	case "h4":
		dst.H4, dst.H4Max = src.H4, src.H4Max
	case "i1":
		dst.I1 = src.I1
	case "i2":
		dst.I2 = src.I2
	case "i3":
		dst.I3 = src.I3
	case "i4":
		dst.I4 = src.I4
	case "i5":
		dst.I5 = src.I5
	case "header_protection_key":
		dst.HeaderProtectionKey = src.HeaderProtectionKey
	default:
		return false
	}
	return true
}

// validateObfuscation checks what can be checked without the device: the
// key names, and parameters that replace the device's whole.
func validateObfuscation(cfg *Config) error {
	if cfg.Obfuscation == nil {
		if len(cfg.ObfuscationKeys) > 0 {
			return fmt.Errorf("%w: obfuscation keys named without values", ErrInvalidConfig)
		}
		return nil
	}
	var scratch Obfuscation
	for _, k := range cfg.ObfuscationKeys {
		if !copyObfsKey(&scratch, &scratch, k) {
			return fmt.Errorf("%w: %q is not an obfuscation key", ErrInvalidConfig, k)
		}
	}
	if len(cfg.ObfuscationKeys) > 0 {
		return nil // checked with the device's values, by obfuscationAfter
	}
	p := cfg.Obfuscation.params()
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// obfuscationAfter is the parameters cfg leaves the device with: nil when
// it does not change them, an error when the result is invalid. Called
// with cfgMu held, so that two requests naming different keys both count.
func (d *Device) obfuscationAfter(cfg *Config) (*Obfuscation, error) {
	if cfg.Obfuscation == nil || len(cfg.ObfuscationKeys) == 0 {
		return cfg.Obfuscation, nil
	}
	o := d.obfuscationStatus()
	for _, k := range cfg.ObfuscationKeys {
		copyObfsKey(&o, cfg.Obfuscation, k) // names checked by validate
	}
	p := o.params()
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &o, nil
}

// setObfuscation installs o; called by Apply after validation. Packet
// buffers grow by S4 first (see transportPadding), so that a padded
// datagram fits whichever buffer it is sent from or received into.
func (d *Device) setObfuscation(o *Obfuscation) {
	p := o.params()
	if !p.On() {
		d.obfs.Store(nil)
		return
	}
	if p.S4 > 0 {
		d.s4.Store(int32(p.S4))
		d.mtuChanged()
	}
	d.obfs.Store(&p)
}

// transportPadding is the largest S4 ever set: the room packet buffers keep
// for it. It never shrinks, so a batch in flight when S4 changes still fits.
func (d *Device) transportPadding() int { return int(d.s4.Load()) }

func (d *Device) obfuscationStatus() Obfuscation {
	p := d.obfs.Load()
	if p == nil {
		return Obfuscation{}
	}
	o := Obfuscation{Jc: p.Jc, Jmin: p.Jmin, Jmax: p.Jmax, S1: p.S1, S2: p.S2, S3: p.S3, S4: p.S4,
		I1: p.I[0], I2: p.I[1], I3: p.I[2], I4: p.I[3], I5: p.I[4], HeaderProtectionKey: p.HeaderKey}
	lo := [4]*uint32{&o.H1, &o.H2, &o.H3, &o.H4}
	hi := [4]*uint32{&o.H1Max, &o.H2Max, &o.H3Max, &o.H4Max}
	for i, r := range p.H {
		*lo[i] = r.Lo
		if r.Hi != r.Lo {
			*hi[i] = r.Hi
		}
	}
	return o
}

// unwrap classifies a received datagram under ob (nil: off). It returns the
// standard type and the message without its padding, its type word still
// the configured one for a handshake message (the MACs cover it). A
// transport message gets its standard type word back for the transport
// parser, which checks no MAC, and stays where it is: its padding is always
// ob.S4 bytes, which open takes off on a crypto worker. ok is false for junk
// and anything malformed.
func unwrap(ob *obfs.Params, msg []byte) (typ uint32, out []byte, ok bool) {
	if ob == nil {
		return noise.PeekType(msg), msg, true
	}
	typ, off, ok := ob.Unwrap(msg) // unmasks a protected header, in place
	if !ok {
		return 0, nil, false
	}
	if typ == noise.TypeTransport {
		obfs.Standard(msg[off:], typ)
	}
	return typ, msg[off:], true
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
		ob.SetType(msg, typ, mrand.Uint32())
	}
	return dst, msg, nil
}

// maskHandshake masks a laid-out handshake datagram's message under header
// protection, after its MACs (the receiver unmasks, then checks them).
func maskHandshake(ob *obfs.Params, datagram []byte, typ uint32) {
	if ob != nil {
		ob.Mask(datagram, typ)
	}
}

// sendJunk sends the datagrams that precede an initiation to ep: the
// signature packets I1 to I5 that are set, then Jc junk datagrams.
// Failures are not the handshake's: the initiation goes out regardless.
func (d *Device) sendJunk(ob *obfs.Params, ep conn.Endpoint) {
	if ob == nil {
		return
	}
	var junk [][]byte
	now := time.Now() // the wall clock: <t> is a Unix time
	for _, spec := range ob.I {
		sig, err := obfs.ParseSignature(spec) // validated by Apply
		if err != nil || sig == nil {
			continue
		}
		b, err := sig.Append(make([]byte, 0, sig.Len()), now, d.opts.Rand)
		if err != nil {
			return
		}
		junk = append(junk, b)
	}
	sizes := make([]byte, 4*ob.Jc)
	if _, err := io.ReadFull(d.opts.Rand, sizes); err != nil {
		return
	}
	for i := range ob.Jc {
		b := make([]byte, ob.JunkSize(binary.LittleEndian.Uint32(sizes[4*i:])))
		if _, err := io.ReadFull(d.opts.Rand, b); err != nil {
			return
		}
		junk = append(junk, b)
	}
	if len(junk) > 0 && d.send(junk, ep) != nil {
		d.ctr.inc(cTxSendErrors)
	}
}

// disguise gives a sealed transport datagram buf[:n] its configured type
// word and S4 random bytes in front, moving it up by S4, and returns its
// new size: 0 when buf has no room (the caller drops it). Every datagram of
// a batch grows by the same S4, so equal sizes stay equal for UDP GSO.
func disguise(ob *obfs.Params, rng *padRNG, buf []byte, n int) int {
	pad := ob.S4
	if pad+n > len(buf) {
		return 0
	}
	if pad > 0 {
		copy(buf[pad:pad+n], buf[:n])
		rng.read(buf[:pad])
	}
	ob.SetType(buf[pad:], noise.TypeTransport, rng.uint32())
	ob.Mask(buf[:pad+n], noise.TypeTransport)
	return pad + n
}

// padRNG draws transport padding and type words for one batch's owner.
// It is a ChaCha8 stream (a CSPRNG, as amneziawg-go's crypto/rand padding
// is) keyed once from the runtime's generator, so that a packet costs a
// few bytes of keystream instead of a runtime call per eight bytes.
type padRNG struct {
	seeded bool
	c      mrand.ChaCha8
}

func (r *padRNG) init() {
	if !r.seeded {
		var seed [32]byte
		for i := 0; i < len(seed); i += 8 {
			binary.LittleEndian.PutUint64(seed[i:], mrand.Uint64())
		}
		r.c.Seed(seed)
		r.seeded = true
	}
}

func (r *padRNG) read(b []byte) {
	r.init()
	_, _ = r.c.Read(b) // never fails
}

func (r *padRNG) uint32() uint32 {
	r.init()
	return uint32(r.c.Uint64())
}
