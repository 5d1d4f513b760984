package metrics

import (
	"cmp"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The Prometheus text exposition format, version 0.0.4:
//
//	# HELP family help text, with \\ and \n escaped
//	# TYPE family counter|gauge|histogram
//	family{label="value",...} 1234
//	family_bucket{label="value",le="0.001"} 5       (histograms)
//
// Every series of a family follows its one HELP and TYPE line; families
// come sorted by name, and counter and gauge series sorted by labels.

type kind uint8

const (
	kindCounter kind = iota
	kindGauge
	kindHistogram
)

func (k kind) String() string {
	switch k {
	case kindCounter:
		return "counter"
	case kindGauge:
		return "gauge"
	}
	return "histogram"
}

// value is a sample's value: counters are exact integers, which a float64
// would round above 2^53.
type value struct {
	u     uint64
	f     float64
	isInt bool
}

func uintValue(u uint64) value   { return value{u: u, isInt: true} }
func floatValue(f float64) value { return value{f: f} }

// sample is one series: family+suffix{labels} value. labels is rendered
// and escaped already (`interface="wg0",peer="..."`), so the series of one
// peer share one string.
type sample struct {
	suffix string // "" or a histogram's _bucket, _sum, _count
	labels string
	v      value
}

type family struct {
	kind    kind
	help    string
	samples []sample
}

// exposition is one scrape's families. Memory is one sample per series;
// the text is written out in chunks.
type exposition struct {
	fams map[string]*family
}

func newExposition() *exposition {
	return &exposition{fams: map[string]*family{}}
}

// add appends a sample to the named family, creating it with k and help.
// A sample whose family exists with another type is dropped: the text
// format has one type per family.
func (e *exposition) add(name string, k kind, help string, s sample) {
	f := e.fams[name]
	if f == nil {
		f = &family{kind: k, help: help}
		e.fams[name] = f
	}
	if f.kind != k {
		return
	}
	f.samples = append(f.samples, s)
}

func (e *exposition) counter(name, help string, v uint64, labels string) {
	e.add(name, kindCounter, help, sample{labels: labels, v: uintValue(v)})
}

func (e *exposition) gauge(name, help string, v float64, labels string) {
	e.add(name, kindGauge, help, sample{labels: labels, v: floatValue(v)})
}

// flushAt is the size at which buffered text goes to the writer.
const flushAt = 32 << 10

// writeTo writes the families sorted by name. Series of a counter or
// gauge are sorted by labels and the second of two equal ones is skipped;
// histogram series keep the order they were added in, which puts buckets
// by bound.
func (e *exposition) writeTo(w io.Writer) error {
	names := make([]string, 0, len(e.fams))
	for n := range e.fams {
		names = append(names, n)
	}
	slices.Sort(names)
	b := make([]byte, 0, flushAt+1024)
	for _, name := range names {
		f := e.fams[name]
		if f.kind != kindHistogram {
			slices.SortStableFunc(f.samples, func(a, b sample) int { return cmp.Compare(a.labels, b.labels) })
		}
		b = append(b, "# HELP "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = appendHelp(b, f.help)
		b = append(b, "\n# TYPE "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = append(b, f.kind.String()...)
		b = append(b, '\n')
		for i, s := range f.samples {
			if f.kind != kindHistogram && i > 0 && f.samples[i-1].labels == s.labels {
				continue
			}
			b = appendSample(b, name, s)
			if len(b) >= flushAt {
				if _, err := w.Write(b); err != nil {
					return err
				}
				b = b[:0]
			}
		}
	}
	_, err := w.Write(b)
	return err
}

func appendSample(b []byte, name string, s sample) []byte {
	b = append(b, name...)
	b = append(b, s.suffix...)
	if s.labels != "" {
		b = append(b, '{')
		b = append(b, s.labels...)
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendValue(b, s.v)
	return append(b, '\n')
}

// appendValue writes integers as integers and other floats in the
// shortest form that parses back to the same value, with NaN and the
// infinities spelled as the format wants.
func appendValue(b []byte, v value) []byte {
	if v.isInt {
		return strconv.AppendUint(b, v.u, 10)
	}
	f := v.f
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	case f == math.Trunc(f) && math.Abs(f) < 1<<53:
		return strconv.AppendInt(b, int64(f), 10)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendHelp escapes a HELP text: backslash and newline.
func appendHelp(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// labelEscaper escapes a label value as the text format wants.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// escapeLabel escapes a label value; invalid UTF-8, which Prometheus
// rejects, becomes U+FFFD.
func escapeLabel(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return labelEscaper.Replace(s)
}

// labels renders name="value" pairs after a prefix that is rendered
// already (or ""); values are escaped here, names must be valid.
func labels(prefix string, kv ...string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i+1 < len(kv); i += 2 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(kv[i])
		b.WriteString(`="`)
		b.WriteString(escapeLabel(kv[i+1]))
		b.WriteByte('"')
	}
	return b.String()
}
