// Package http1 parses and writes HTTP/1.x message heads (RFC 9112) for
// the two parts of fips-go that speak HTTP, the metrics endpoint and the
// HTTP proxy of the rootless modes. They do not use net/http: linking it
// (with crypto/tls, x509 and the HTTP/2 tables it brings) cost every
// daemon 2.8 MiB of resident memory, used or not.
package http1

import (
	"fmt"
	"strconv"
	"strings"
)

// Field is one field line of a message head.
type Field struct {
	Name, Value string
}

// Header is the field lines of a message head in the order received, with
// the names spelled as sent: a proxy passes them on as they came, and
// order matters for repeated fields.
type Header []Field

// Get returns the first value of the field name (any case), or "".
func (h Header) Get(name string) string {
	for _, f := range h {
		if EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// Values returns every value of the field name (any case), in order.
func (h Header) Values(name string) []string {
	var vs []string
	for _, f := range h {
		if EqualFold(f.Name, name) {
			vs = append(vs, f.Value)
		}
	}
	return vs
}

// Has reports whether the field name (any case) is present.
func (h Header) Has(name string) bool {
	for _, f := range h {
		if EqualFold(f.Name, name) {
			return true
		}
	}
	return false
}

// Del removes every line of the field name (any case).
func (h *Header) Del(name string) {
	out := (*h)[:0]
	for _, f := range *h {
		if !EqualFold(f.Name, name) {
			out = append(out, f)
		}
	}
	clear((*h)[len(out):])
	*h = out
}

// Add appends a field line.
func (h *Header) Add(name, value string) {
	*h = append(*h, Field{name, value})
}

// Set replaces the field name with the single value.
func (h *Header) Set(name, value string) {
	h.Del(name)
	h.Add(name, value)
}

// Clone returns a copy that shares nothing with h.
func (h Header) Clone() Header {
	return append(Header(nil), h...)
}

// HasToken reports whether a comma-separated list in the field name
// (RFC 9110 section 5.6.1) holds token, in any case.
func (h Header) HasToken(name, token string) bool {
	found := false
	h.EachToken(name, func(t string) {
		found = found || EqualFold(t, token)
	})
	return found
}

// EachToken calls fn with each non-empty element of the comma-separated
// lists in the field name.
func (h Header) EachToken(name string, fn func(string)) {
	for _, f := range h {
		if !EqualFold(f.Name, name) {
			continue
		}
		for t := range strings.SplitSeq(f.Value, ",") {
			if t = strings.Trim(t, " \t"); t != "" {
				fn(t)
			}
		}
	}
}

// AppendTo appends the field lines, each ending in CRLF.
func (h Header) AppendTo(b []byte) []byte {
	for _, f := range h {
		b = append(b, f.Name...)
		b = append(b, ": "...)
		b = append(b, f.Value...)
		b = append(b, "\r\n"...)
	}
	return b
}

// EqualFold compares ASCII case-insensitively. Field names are tokens,
// hence ASCII; strings.EqualFold would also fold Unicode ("\u212a" is
// "k"), which could make a crafted Connection value match a real field.
func EqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// IsToken reports whether s is a token (RFC 9110 section 5.6.2): a
// method or field name.
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// IsFieldText reports whether s may be a field value or reason phrase:
// no control characters but HTAB (so no CR, LF or NUL); obs-text is
// allowed.
func IsFieldText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// ContentLength parses the Content-Length fields of h: repeats must agree
// (RFC 9112 section 6.3, item 5), each a decimal of at most 18 digits. ok
// is false when there is none.
func ContentLength(h Header) (n int64, ok bool, err error) {
	n = -1
	bad := false
	h.EachToken("Content-Length", func(t string) {
		v, perr := strconv.ParseInt(t, 10, 64)
		if perr != nil || len(t) > 18 || !IsDigits(t) || (n >= 0 && v != n) {
			bad = true
		}
		n = v
	})
	if bad || (n < 0 && h.Has("Content-Length")) {
		return 0, false, fmt.Errorf("%w: bad Content-Length %.64q", ErrMalformed, h.Values("Content-Length"))
	}
	if n < 0 {
		return 0, false, nil
	}
	return n, true, nil
}
