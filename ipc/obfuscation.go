package ipc

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fips-go/fips-go/device"
)

// The AmneziaWG keys, as amneziawg-go and awg(8) name them: the same words
// in UAPI requests (lower case), in `set` arguments and, without regard to
// case, in a configuration file's [Interface] section (Jc = 4).
//
//	jc=<n>  jmin=<n>  jmax=<n>  s1=<n>  s2=<n>  h1=<u32> .. h4=<u32>
//
// As in amneziawg-go, a request or file that names any of them replaces all
// nine: the ones it does not name are 0 (off, or the standard type). One
// that names none leaves them as they are. device.Obfuscation says what the
// values mean and Apply checks them together.
var obfsKeys = [...]string{"jc", "jmin", "jmax", "s1", "s2", "h1", "h2", "h3", "h4"}

// isObfsKey reports whether key (lower case) is one of obfsKeys.
func isObfsKey(key string) bool {
	for _, k := range obfsKeys {
		if k == key {
			return true
		}
	}
	return false
}

// obfsFields lists o's fields in obfsKeys' order.
func obfsFields(o *device.Obfuscation) (ints [5]*int, hs [4]*uint32) {
	return [5]*int{&o.Jc, &o.Jmin, &o.Jmax, &o.S1, &o.S2}, [4]*uint32{&o.H1, &o.H2, &o.H3, &o.H4}
}

// setObfsKey parses value into the field key (lower case) names, creating
// *o on first use. Integers are read as amneziawg-go reads them (decimal,
// a sign allowed: Apply refuses what is out of range); types as unsigned
// 32-bit decimals.
func setObfsKey(o **device.Obfuscation, key, value string) error {
	if *o == nil {
		*o = new(device.Obfuscation)
	}
	ints, hs := obfsFields(*o)
	for i, k := range obfsKeys {
		if k != key {
			continue
		}
		if i < len(ints) {
			if len(value) > 11 {
				return fmt.Errorf("%q is not a number", shorten(value))
			}
			n, err := strconv.Atoi(value)
			if err != nil {
				return fmt.Errorf("%q is not a number", shorten(value))
			}
			*ints[i] = n
			return nil
		}
		n, err := parseDecimal([]byte(value), 32)
		if err != nil {
			return err
		}
		*hs[i-len(ints)] = uint32(n)
		return nil
	}
	return fmt.Errorf("%q is not an obfuscation key", shorten(key))
}

// appendObfs appends o as UAPI lines: every key when all is set (a set
// request replaces all nine), else only those that are not 0 (a get reply,
// as amneziawg-go writes it).
func appendObfs(b []byte, o device.Obfuscation, all bool) []byte {
	ints, hs := obfsFields(&o)
	for i, k := range obfsKeys {
		var v int64
		if i < len(ints) {
			v = int64(*ints[i])
		} else {
			v = int64(*hs[i-len(ints)])
		}
		if v == 0 && !all {
			continue
		}
		b = append(b, k...)
		b = append(b, '=')
		b = strconv.AppendInt(b, v, 10)
		b = append(b, '\n')
	}
	return b
}

// formatObfs writes o's set keys as configuration file lines (Jc = 4).
func formatObfs(b *strings.Builder, o device.Obfuscation) {
	ints, hs := obfsFields(&o)
	names := [...]string{"Jc", "Jmin", "Jmax", "S1", "S2", "H1", "H2", "H3", "H4"}
	for i, name := range names {
		var v int64
		if i < len(ints) {
			v = int64(*ints[i])
		} else {
			v = int64(*hs[i-len(ints)])
		}
		if v != 0 {
			fmt.Fprintf(b, "%s = %d\n", name, v)
		}
	}
}
