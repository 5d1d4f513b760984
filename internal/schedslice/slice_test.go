package schedslice

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	def := 300 * time.Microsecond
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", def, true},
		{"off", 0, true},
		{"100us", 100 * time.Microsecond, true},
		{"2ms", 2 * time.Millisecond, true},
		{"100ms", 100 * time.Millisecond, true},
		{"99us", 0, false},
		{"101ms", 0, false},
		{"0", 0, false},
		{"-1ms", 0, false},
		{"fast", 0, false},
		{"1", 0, false},
	} {
		got, err := Parse(c.in, def)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}
