package ipc

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fips-go/fips-go/device"
)

// The AmneziaWG keys, as amneziawg-go (v0.2.19) and awg(8) name them: the
// same words in UAPI requests (lower case), in `set` arguments and, without
// regard to case, in a configuration file's [Interface] section (Jc = 4).
//
//	jc=<n> jmin=<n> jmax=<n> s1=<n> .. s4=<n>
//	h1=<u32>[-<u32>] .. h4=<u32>[-<u32>]   a type or a range of types
//	i1=<tags> .. i5=<tags>                 signature packets ("<b 0x12> <r 4>")
//	header_protection_key=<hex>            amneziawg-go 3.x's header protection
//	                                       (HeaderProtectionKey = <base64> in a file)
//
// As amneziawg-go applies them, a request or file changes only the keys it
// names (device.Config.ObfuscationKeys); naming one with 0 turns it off.
// device.Obfuscation says what the values mean, and Apply checks them
// together with the ones the device keeps.
var obfsKeys = [...]string{"jc", "jmin", "jmax", "s1", "s2", "s3", "s4",
	"h1", "h2", "h3", "h4", "i1", "i2", "i3", "i4", "i5", "header_protection_key"}

// obfsNames are obfsKeys as a configuration file writes them.
var obfsNames = [...]string{"Jc", "Jmin", "Jmax", "S1", "S2", "S3", "S4",
	"H1", "H2", "H3", "H4", "I1", "I2", "I3", "I4", "I5", "HeaderProtectionKey"}

// isObfsKey reports whether key (lower case) is one of obfsKeys.
func isObfsKey(key string) bool {
	for _, k := range obfsKeys {
		if k == key {
			return true
		}
	}
	return false
}

// obfsField is one key's place in device.Obfuscation: an integer, a type
// range (lo, hi: hi 0 for a single type), a signature specification or a
// key.
type obfsField struct {
	n      *int
	lo, hi *uint32
	s      *string
	key    *[32]byte
}

// obfsFields lists o's fields in obfsKeys' order.
func obfsFields(o *device.Obfuscation) [len(obfsKeys)]obfsField {
	return [...]obfsField{{n: &o.Jc}, {n: &o.Jmin}, {n: &o.Jmax}, {n: &o.S1}, {n: &o.S2}, {n: &o.S3}, {n: &o.S4},
		{lo: &o.H1, hi: &o.H1Max}, {lo: &o.H2, hi: &o.H2Max}, {lo: &o.H3, hi: &o.H3Max}, {lo: &o.H4, hi: &o.H4Max},
		{s: &o.I1}, {s: &o.I2}, {s: &o.I3}, {s: &o.I4}, {s: &o.I5}, {key: &o.HeaderProtectionKey}}
}

// setObfsKey parses value into cfg's field that key (lower case) names and
// records key in cfg.ObfuscationKeys, so that the request changes it alone.
func setObfsKey(cfg *device.Config, key, value string) error {
	if err := setObfsField(&cfg.Obfuscation, key, value); err != nil {
		return err
	}
	if !slices.Contains(cfg.ObfuscationKeys, key) {
		cfg.ObfuscationKeys = append(cfg.ObfuscationKeys, key)
	}
	return nil
}

// setObfsField parses value into the field key (lower case) names, creating
// *o on first use. Integers are read as amneziawg-go reads them (decimal,
// a sign allowed: Apply refuses what is out of range); types as unsigned
// 32-bit decimals, a range as two joined by '-'; signature packets are
// kept as written and checked by Apply.
func setObfsField(o **device.Obfuscation, key, value string) error {
	if *o == nil {
		*o = new(device.Obfuscation)
	}
	fields := obfsFields(*o)
	for i, k := range obfsKeys {
		if k != key {
			continue
		}
		f := fields[i]
		switch {
		case f.n != nil:
			n, err := strconv.Atoi(value)
			if len(value) > 11 || err != nil {
				return fmt.Errorf("%q is not a number", shorten(value))
			}
			*f.n = n
		case f.lo != nil:
			lo, hi, err := parseTypeRange(value)
			if err != nil {
				return err
			}
			*f.lo, *f.hi = lo, hi
		case f.key != nil:
			k, err := parseHexKey([]byte(value))
			if err != nil {
				return err
			}
			*f.key = k
		default:
			*f.s = value
		}
		return nil
	}
	return fmt.Errorf("%q is not an obfuscation key", shorten(key))
}

// clearStandardTypes unsets each hN that is its standard type N, as a get
// reply shows them, so that a Status read back equals the device's.
func clearStandardTypes(o *device.Obfuscation) {
	for i, h := range [...][2]*uint32{{&o.H1, &o.H1Max}, {&o.H2, &o.H2Max}, {&o.H3, &o.H3Max}, {&o.H4, &o.H4Max}} {
		if n := uint32(i + 1); *h[0] == n && (*h[1] == 0 || *h[1] == n) {
			*h[0], *h[1] = 0, 0
		}
	}
}

// parseTypeRange reads "N" (hi 0) or "N-M" (M >= N).
func parseTypeRange(v string) (lo, hi uint32, err error) {
	a, b, isRange := strings.Cut(v, "-")
	n, err := parseDecimal([]byte(a), 32)
	if err != nil {
		return 0, 0, err
	}
	if !isRange {
		return uint32(n), 0, nil
	}
	m, err := parseDecimal([]byte(b), 32)
	if err != nil {
		return 0, 0, err
	}
	if m < n {
		return 0, 0, fmt.Errorf("%q is an empty range", shorten(v))
	}
	return uint32(n), uint32(m), nil
}

// obfsValue formats field f; "" when it is 0 (unset).
func obfsValue(f obfsField) string {
	switch {
	case f.n != nil:
		if *f.n == 0 {
			return ""
		}
		return strconv.Itoa(*f.n)
	case f.lo != nil:
		if *f.lo == 0 && *f.hi == 0 {
			return ""
		}
		if *f.hi == 0 || *f.hi == *f.lo {
			return strconv.FormatUint(uint64(*f.lo), 10)
		}
		return strconv.FormatUint(uint64(*f.lo), 10) + "-" + strconv.FormatUint(uint64(*f.hi), 10)
	case f.key != nil:
		if *f.key == ([32]byte{}) {
			return ""
		}
		return hex.EncodeToString(f.key[:])
	}
	return *f.s
}

// setObfsKeyBase64 is setObfsKey for the header protection key written in
// base64, as a configuration file and awg(8)'s key files write it.
func setObfsKeyBase64(cfg *device.Config, value string) error {
	k, err := parseKeyBase64(value)
	if err != nil {
		return err
	}
	return setObfsKey(cfg, "header_protection_key", hex.EncodeToString(k[:]))
}

// appendObfs appends o's keys that are set as UAPI lines, as amneziawg-go
// writes a get reply. A set request (all) that would name none names s1=0
// instead, so that it still turns obfuscation off: a key left out means 0
// to fips-go, and leaving the zeros out keeps the request acceptable to
// amneziawg-go, which refuses jc=0 and reads h1=0 as the type 0.
//
// A get reply (all false) of a device whose obfuscation is on shows the
// unset types as their standard values, h1=1 to h4=4, as amneziawg-go's
// does: awg(8) reads a missing h2 as 0 and would show "h2: 0".
func appendObfs(b []byte, o device.Obfuscation, all bool) []byte {
	if o == (device.Obfuscation{}) {
		if all {
			return append(b, "s1=0\n"...)
		}
		return b
	}
	for i, f := range obfsFields(&o) {
		v := obfsValue(f)
		if v == "" && !all && f.lo != nil {
			v = obfsKeys[i][1:] // the standard type: h1=1 .. h4=4
		}
		if v != "" {
			b = append(b, obfsKeys[i]...)
			b = append(b, '=')
			b = append(b, v...)
			b = append(b, '\n')
		}
	}
	return b
}

// appendObfsKeys appends the keys named (a Config's ObfuscationKeys) with
// o's values as UAPI lines, in obfsKeys' order; a 0 is written as 0, as it
// turns that key off.
func appendObfsKeys(b []byte, o device.Obfuscation, keys []string) []byte {
	for i, f := range obfsFields(&o) {
		if !slices.Contains(keys, obfsKeys[i]) {
			continue
		}
		v := obfsValue(f)
		if v == "" {
			v = "0"
		}
		b = append(b, obfsKeys[i]...)
		b = append(b, '=')
		b = append(b, v...)
		b = append(b, '\n')
	}
	return b
}

// formatObfs writes o's set keys as configuration file lines (Jc = 4).
func formatObfs(b *strings.Builder, o device.Obfuscation) {
	for i, f := range obfsFields(&o) {
		v := obfsValue(f)
		if v != "" && f.key != nil {
			v = base64.StdEncoding.EncodeToString(f.key[:])
		}
		if v != "" {
			fmt.Fprintf(b, "%s = %s\n", obfsNames[i], v)
		}
	}
}
