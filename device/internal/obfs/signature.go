package obfs

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// A Signature is a parsed I1..I5 specification: a datagram sent before each
// handshake initiation (after the previous signature, before the junk), made
// to look like some other protocol's first packet. The specification is a
// sequence of tags, as amneziawg-go reads them:
//
//	<b 0xHEX>  these bytes (an even number of hex digits; "0x" optional)
//	<r N>      N random bytes
//	<rc N>     N random letters a-z, A-Z
//	<rd N>     N random digits 0-9
//	<t>        the current Unix time, 4 bytes big-endian
//	<d> <ds>   the packet's data, raw or base64: none in a signature packet
//	<dz N>     the data's length in N big-endian bytes: N zero bytes here
//
// Only white space may stand between tags. The receiver ignores signature
// packets, so only the sender needs them.
type Signature []sigTag

type sigTag struct {
	kind string // "b", "r", "rc", "rd", "t", "dz"
	n    int    // length for r, rc, rd, dz
	b    []byte // bytes for b
}

// ErrBadSignature is wrapped by ParseSignature's errors.
var ErrBadSignature = errors.New("bad signature packet")

// ParseSignature parses spec; "" (or only white space) is no packet (nil).
// A packet must be 1 to MaxDatagram bytes long.
func ParseSignature(spec string) (Signature, error) {
	var sig Signature
	rest := strings.TrimSpace(spec)
	for rest != "" {
		if rest[0] != '<' {
			return nil, fmt.Errorf("%w: %q is outside a tag", ErrBadSignature, short(rest))
		}
		end := strings.IndexByte(rest, '>')
		if end < 0 {
			return nil, fmt.Errorf("%w: %q has no closing >", ErrBadSignature, short(rest))
		}
		t, err := parseTag(rest[1:end])
		if err != nil {
			return nil, err
		}
		if t.kind != "d" && t.kind != "ds" {
			sig = append(sig, t)
		}
		if sig.Len() > MaxDatagram {
			return nil, fmt.Errorf("%w: longer than %d bytes", ErrBadSignature, MaxDatagram)
		}
		rest = strings.TrimSpace(rest[end+1:])
	}
	if strings.TrimSpace(spec) != "" && sig.Len() == 0 {
		return nil, fmt.Errorf("%w: %q makes an empty packet", ErrBadSignature, short(spec))
	}
	return sig, nil
}

func parseTag(body string) (sigTag, error) {
	f := strings.Fields(body)
	if len(f) == 0 {
		return sigTag{}, fmt.Errorf("%w: empty tag <>", ErrBadSignature)
	}
	t := sigTag{kind: f[0]}
	args := 1
	switch t.kind {
	case "t", "d", "ds":
		args = 0
	case "b", "r", "rc", "rd", "dz":
	default:
		return sigTag{}, fmt.Errorf("%w: unknown tag <%s>", ErrBadSignature, short(t.kind))
	}
	if len(f)-1 != args {
		return sigTag{}, fmt.Errorf("%w: <%s> takes %d argument(s), not %d", ErrBadSignature, t.kind, args, len(f)-1)
	}
	if args == 0 {
		return t, nil
	}
	arg := f[1]
	if t.kind == "b" {
		h := strings.TrimPrefix(strings.TrimPrefix(arg, "0x"), "0X")
		b, err := hex.DecodeString(h)
		if err != nil || len(b) == 0 {
			return sigTag{}, fmt.Errorf("%w: <b %s>: not an even, non-empty number of hex digits", ErrBadSignature, short(arg))
		}
		t.b = b
		return t, nil
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 || n > MaxDatagram {
		return sigTag{}, fmt.Errorf("%w: <%s %s>: the length must be 1..%d", ErrBadSignature, t.kind, short(arg), MaxDatagram)
	}
	t.n = n
	return t, nil
}

// Len is the size of the packet s makes.
func (s Signature) Len() int {
	n := 0
	for _, t := range s {
		switch t.kind {
		case "b":
			n += len(t.b)
		case "t":
			n += 4
		default:
			n += t.n
		}
	}
	return n
}

// Append appends the packet s makes to dst, with the time now and random
// bytes from rand.
func (s Signature) Append(dst []byte, now time.Time, rand io.Reader) ([]byte, error) {
	for _, t := range s {
		switch t.kind {
		case "b":
			dst = append(dst, t.b...)
		case "t":
			dst = binary.BigEndian.AppendUint32(dst, uint32(now.Unix()))
		case "dz":
			dst = append(dst, make([]byte, t.n)...)
		default:
			start := len(dst)
			dst = append(dst, make([]byte, t.n)...)
			if _, err := io.ReadFull(rand, dst[start:]); err != nil {
				return nil, err
			}
			mapChars(dst[start:], t.kind)
		}
	}
	return dst, nil
}

const (
	letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digits  = "0123456789"
)

// mapChars turns random bytes into the alphabet of <rc> or <rd>.
func mapChars(b []byte, kind string) {
	var set string
	switch kind {
	case "rc":
		set = letters
	case "rd":
		set = digits
	default:
		return
	}
	for i := range b {
		b[i] = set[int(b[i])%len(set)]
	}
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
