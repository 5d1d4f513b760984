package conn

import "testing"

func TestOptionsDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.batchSize != 128 || o.socketBuffer != 7<<20 || o.groBuffers != 32 || o.maxConcurrentSends < 4 || o.Logf == nil {
		t.Fatalf("zero Options became %+v", o)
	}
	o.Logf("nil Logf must discard, not panic: %d", 1)

	o = Options{batchSize: 5000, groBuffers: 9999, socketBuffer: -1}.withDefaults()
	if o.batchSize != maxBatchSize || o.groBuffers != maxBatchSize || o.socketBuffer != -1 {
		t.Fatalf("clamping gave %+v", o)
	}
	if o := (Options{batchSize: 8}).withDefaults(); o.groBuffers != 8 {
		t.Fatalf("GROBuffers %d above BatchSize 8", o.groBuffers)
	}
}

func TestParseEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:51820":      "127.0.0.1:51820",
		"[::ffff:192.0.2.1]:1": "192.0.2.1:1",
		"[2001:db8::1]:65535":  "[2001:db8::1]:65535",
		"[fe80::1%eth0]:51820": "[fe80::1%eth0]:51820",
	} {
		ep, err := ParseEndpoint(in)
		if err != nil || ep.String() != want {
			t.Errorf("ParseEndpoint(%q) = %v, %v; want %s", in, ep, err, want)
		}
	}
	for _, in := range []string{"", "1.2.3.4", "1.2.3.4:0", "host:51820", "[::1]:99999"} {
		if _, err := ParseEndpoint(in); err == nil {
			t.Errorf("ParseEndpoint(%q) succeeded", in)
		}
	}
}
