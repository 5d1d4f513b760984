package httpproxy

import "strings"

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
		if equalFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// Values returns every value of the field name (any case), in order.
func (h Header) Values(name string) []string {
	var vs []string
	for _, f := range h {
		if equalFold(f.Name, name) {
			vs = append(vs, f.Value)
		}
	}
	return vs
}

// Has reports whether the field name (any case) is present.
func (h Header) Has(name string) bool {
	for _, f := range h {
		if equalFold(f.Name, name) {
			return true
		}
	}
	return false
}

// Del removes every line of the field name (any case).
func (h *Header) Del(name string) {
	out := (*h)[:0]
	for _, f := range *h {
		if !equalFold(f.Name, name) {
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

// hasToken reports whether a comma-separated list in the field name
// (RFC 9110 section 5.6.1) holds token, in any case.
func (h Header) hasToken(name, token string) bool {
	found := false
	h.eachToken(name, func(t string) {
		found = found || equalFold(t, token)
	})
	return found
}

// eachToken calls fn with each non-empty element of the comma-separated
// lists in the field name.
func (h Header) eachToken(name string, fn func(string)) {
	for _, f := range h {
		if !equalFold(f.Name, name) {
			continue
		}
		for t := range strings.SplitSeq(f.Value, ",") {
			if t = strings.Trim(t, " \t"); t != "" {
				fn(t)
			}
		}
	}
}

// appendTo appends the field lines, each ending in CRLF.
func (h Header) appendTo(b []byte) []byte {
	for _, f := range h {
		b = append(b, f.Name...)
		b = append(b, ": "...)
		b = append(b, f.Value...)
		b = append(b, "\r\n"...)
	}
	return b
}

// equalFold compares ASCII case-insensitively. Field names are tokens,
// hence ASCII; strings.EqualFold would also fold Unicode ("\u212a" is
// "k"), which could make a crafted Connection value match a real field.
func equalFold(a, b string) bool {
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

// isToken reports whether s is a token (RFC 9110 section 5.6.2): a
// method or field name.
func isToken(s string) bool {
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

// isFieldText reports whether s may be a field value or reason phrase:
// no control characters but HTAB (so no CR, LF or NUL); obs-text is
// allowed.
func isFieldText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
