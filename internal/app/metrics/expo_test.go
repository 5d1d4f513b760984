package metrics

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestAppendValue(t *testing.T) {
	for _, c := range []struct {
		v    value
		want string
	}{
		{uintValue(math.MaxUint64), "18446744073709551615"},
		{uintValue(0), "0"},
		{floatValue(0), "0"},
		{floatValue(math.Copysign(0, -1)), "0"},
		{floatValue(-3), "-3"},
		{floatValue(1 << 53), "9.007199254740992e+15"},
		{floatValue(0.5), "0.5"},
		{floatValue(1e-7), "1e-07"},
		{floatValue(1.5e300), "1.5e+300"},
		{floatValue(math.NaN()), "NaN"},
		{floatValue(math.Inf(1)), "+Inf"},
		{floatValue(math.Inf(-1)), "-Inf"},
	} {
		if got := string(appendValue(nil, c.v)); got != c.want {
			t.Errorf("appendValue(%+v) = %q, want %q", c.v, got, c.want)
		}
	}
}

// TestExpositionFormat: sorting, one HELP and TYPE per family, escaping,
// duplicates and a type clash, checked as text and with Prometheus's
// parser.
func TestExpositionFormat(t *testing.T) {
	e := newExposition()
	l := labels("", "interface", "w\\g\"0\n\xff")
	e.gauge("b_gauge", "help with \\ and\nnewline", math.NaN(), labels(l, "k", "2"))
	e.gauge("b_gauge", "ignored", math.Inf(-1), labels(l, "k", "1"))
	e.counter("a_total", "first", 1, l)
	e.counter("a_total", "first", 2, l) // duplicate: skipped
	e.gauge("a_total", "clash", 3, "")  // another type: dropped
	e.gauge("c", "no labels", 0.25, "")
	var b bytes.Buffer
	if err := e.writeTo(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP a_total first
# TYPE a_total counter
a_total{interface="w\\g\"0\n` + "\uFFFD" + `"} 1
# HELP b_gauge help with \\ and\nnewline
# TYPE b_gauge gauge
b_gauge{interface="w\\g\"0\n` + "\uFFFD" + `",k="1"} -Inf
b_gauge{interface="w\\g\"0\n` + "\uFFFD" + `",k="2"} NaN
# HELP c no labels
# TYPE c gauge
c 0.25
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	if got := fams["a_total"].GetMetric()[0].GetLabel()[0].GetValue(); got != "w\\g\"0\n\uFFFD" {
		t.Errorf("label read back as %q", got)
	}
}

// TestExpositionWritesInChunks: a large exposition reaches the writer in
// pieces of bounded size.
func TestExpositionWritesInChunks(t *testing.T) {
	e := newExposition()
	for i := range 5000 {
		e.counter("x_total", "h", uint64(i), labels("", "i", strconv.Itoa(i)))
	}
	w := &maxWriter{}
	e.writeTo(w)
	if w.max > flushAt+1024 || w.n < 3 {
		t.Errorf("%d writes, the largest %d bytes", w.n, w.max)
	}
}

type maxWriter struct{ n, max int }

func (w *maxWriter) Write(p []byte) (int, error) {
	w.n++
	w.max = max(w.max, len(p))
	return len(p), nil
}
