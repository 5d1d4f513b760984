package noise

import (
	"bytes"
	"errors"
	"testing"
)

func sampleInitiation() Initiation {
	var m Initiation
	m.Sender = 0x04030201
	copy(m.Ephemeral[:], seq(32, 0x10))
	copy(m.Static[:], seq(48, 0x30))
	copy(m.Timestamp[:], seq(28, 0x60))
	copy(m.MAC1[:], seq(16, 0x80))
	copy(m.MAC2[:], seq(16, 0x90))
	return m
}

func sampleResponse() Response {
	var m Response
	m.Sender, m.Receiver = 0x04030201, 0x08070605
	copy(m.Ephemeral[:], seq(32, 0x10))
	copy(m.Empty[:], seq(16, 0x30))
	copy(m.MAC1[:], seq(16, 0x80))
	copy(m.MAC2[:], seq(16, 0x90))
	return m
}

func sampleCookieReply() CookieReply {
	var m CookieReply
	m.Receiver = 0x04030201
	copy(m.Nonce[:], seq(24, 0x10))
	copy(m.Cookie[:], seq(32, 0x30))
	return m
}

func TestInitiationLayout(t *testing.T) {
	m := sampleInitiation()
	b := m.AppendTo([]byte{0xee}) // appends after existing bytes
	if len(b) != 1+InitiationSize || b[0] != 0xee {
		t.Fatalf("AppendTo: %d bytes", len(b))
	}
	b = b[1:]
	want := append([]byte{1, 0, 0, 0, 1, 2, 3, 4}, seq(32, 0x10)...)
	want = append(want, seq(48, 0x30)...)
	want = append(want, seq(28, 0x60)...)
	want = append(want, seq(16, 0x80)...)
	want = append(want, seq(16, 0x90)...)
	assertBytes(t, "initiation", b, want)
	got, err := ParseInitiation(b)
	if err != nil || got != m {
		t.Fatalf("round trip: %v %+v", err, got)
	}
}

func TestResponseLayout(t *testing.T) {
	m := sampleResponse()
	b := m.AppendTo(nil)
	want := append([]byte{2, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, seq(32, 0x10)...)
	want = append(want, seq(16, 0x30)...)
	want = append(want, seq(16, 0x80)...)
	want = append(want, seq(16, 0x90)...)
	assertBytes(t, "response", b, want)
	got, err := ParseResponse(b)
	if err != nil || got != m {
		t.Fatalf("round trip: %v %+v", err, got)
	}
}

func TestCookieReplyLayout(t *testing.T) {
	m := sampleCookieReply()
	b := m.AppendTo(nil)
	want := append([]byte{3, 0, 0, 0, 1, 2, 3, 4}, seq(24, 0x10)...)
	want = append(want, seq(32, 0x30)...)
	assertBytes(t, "cookie reply", b, want)
	got, err := ParseCookieReply(b)
	if err != nil || got != m {
		t.Fatalf("round trip: %v %+v", err, got)
	}
}

// TestParseRejects checks every parser refuses wrong sizes, wrong types and
// non-zero reserved bytes with the right sentinel.
func TestParseRejects(t *testing.T) {
	init, resp, reply := sampleInitiation(), sampleResponse(), sampleCookieReply()
	parsers := []struct {
		name  string
		valid []byte
		parse func([]byte) error
	}{
		{"initiation", init.AppendTo(nil), func(b []byte) error { _, err := ParseInitiation(b); return err }},
		{"response", resp.AppendTo(nil), func(b []byte) error { _, err := ParseResponse(b); return err }},
		{"cookie reply", reply.AppendTo(nil), func(b []byte) error { _, err := ParseCookieReply(b); return err }},
	}
	for _, p := range parsers {
		if err := p.parse(p.valid); err != nil {
			t.Fatalf("%s: valid message rejected: %v", p.name, err)
		}
		for _, n := range []int{0, 1, 3, 4, len(p.valid) - 1, len(p.valid) + 1} {
			b := append(bytes.Clone(p.valid), 0)[:n]
			if err := p.parse(b); !errors.Is(err, ErrMessageSize) {
				t.Errorf("%s with %d bytes: %v, want ErrMessageSize", p.name, n, err)
			}
		}
		for i := range 4 {
			b := bytes.Clone(p.valid)
			b[i] ^= 0x40
			if err := p.parse(b); !errors.Is(err, ErrMessageType) {
				t.Errorf("%s with byte %d changed: %v, want ErrMessageType", p.name, i, err)
			}
		}
	}
}

func TestPeekType(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		want uint32
	}{
		{nil, 0}, {[]byte{1, 0, 0}, 0}, {[]byte{1, 0, 0, 0}, TypeInitiation},
		{[]byte{4, 0, 0, 0, 9}, TypeTransport}, {[]byte{1, 0, 0, 1}, 0x01000001},
	} {
		if got := PeekType(c.b); got != c.want {
			t.Errorf("PeekType(%x) = %#x, want %#x", c.b, got, c.want)
		}
	}
}

func TestTransportHeader(t *testing.T) {
	b := make([]byte, TransportOverhead)
	PutTransportHeader(b, 0x04030201, 0x0c0b0a0908070605)
	assertBytes(t, "header", b[:16], []byte{4, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	r, c, err := ParseTransportHeader(b)
	if err != nil || r != 0x04030201 || c != 0x0c0b0a0908070605 {
		t.Fatalf("ParseTransportHeader = %#x, %#x, %v", r, c, err)
	}
	if _, _, err := ParseTransportHeader(b[:TransportOverhead-1]); !errors.Is(err, ErrMessageSize) {
		t.Fatalf("short message: %v", err)
	}
	b[3] = 1
	if _, _, err := ParseTransportHeader(b); !errors.Is(err, ErrMessageType) {
		t.Fatalf("reserved byte set: %v", err)
	}
	if n := testing.AllocsPerRun(100, func() { ParseTransportHeader(b) }); n != 0 {
		t.Fatalf("rejecting a header allocates %v times", n)
	}
}

func TestReceiverIndex(t *testing.T) {
	resp, reply := sampleResponse(), sampleCookieReply()
	transport := make([]byte, TransportOverhead+10)
	PutTransportHeader(transport, 0x11223344, 5)
	init := sampleInitiation()
	for _, c := range []struct {
		name string
		msg  []byte
		want uint32
		ok   bool
	}{
		{"response", resp.AppendTo(nil), resp.Receiver, true},
		{"cookie reply", reply.AppendTo(nil), reply.Receiver, true},
		{"transport", transport, 0x11223344, true},
		{"keepalive", transport[:TransportOverhead], 0x11223344, true},
		{"short transport", transport[:TransportOverhead-1], 0, false},
		{"long response", append(resp.AppendTo(nil), 0), 0, false},
		{"initiation", init.AppendTo(nil), 0, false},
		{"empty", nil, 0, false},
	} {
		got, ok := ReceiverIndex(c.msg)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: ReceiverIndex = %#x, %v; want %#x, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
