package ipc

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzReadReply feeds fuzzed replies to the client's get=1 and get=fips
// parsers: what a daemon, ours or another implementation, sends back over
// the UAPI socket. Nothing may panic; a refusal is an *Error with a
// negative errno; and a get=1 reply that parses describes a status that
// WriteGet writes back in a form that parses and writes back the same.
func FuzzReadReply(f *testing.F) {
	f.Add("private_key=" + strings.Repeat("01", 32) + "\nlisten_port=51820\nfwmark=7\n" +
		"public_key=" + strings.Repeat("02", 32) + "\npreshared_key=" + strings.Repeat("03", 32) +
		"\nendpoint=[fe80::1%eth0]:51820\nlast_handshake_time_sec=1700000000\nlast_handshake_time_nsec=5\n" +
		"tx_bytes=10\nrx_bytes=20\npersistent_keepalive_interval=25\nallowed_ip=10.0.0.0/8\nallowed_ip=::/0\n" +
		"protocol_version=1\nerrno=0\n\n")
	f.Add("counter_rx_drop_handshake_queue_full=3\ncounter_tx_packets=99\nerrno=0\n\n")
	f.Add("listen_port=1\nfips_tcp_listen=443\npublic_key=" + strings.Repeat("02", 32) +
		"\nendpoint=192.0.2.1:443\nfips_transport=tcp\nerrno=0\n\n")
	f.Add("errno=-22\n\n")
	f.Add("public_key=zz\nerrno=0\n")
	f.Fuzz(func(t *testing.T, reply string) {
		var g getParser
		err := readReply(newLineReader(strings.NewReader(reply), MaxReply), g.kv)
		checkReplyError(t, err)
		var c counterParser
		checkReplyError(t, readReply(newLineReader(strings.NewReader(reply), MaxReply), c.kv))
		if err != nil {
			return
		}
		st := g.finish()
		var out bytes.Buffer
		if err := WriteGet(&out, st); err != nil {
			return // a status WriteGet refuses (bad counter names and the like)
		}
		writeErrno(&out, 0) // as the server ends a reply
		first := bytes.Clone(out.Bytes())
		var g2 getParser
		if err := readReply(newLineReader(&out, MaxReply), g2.kv); err != nil {
			t.Fatalf("WriteGet output does not parse: %v\n%s", err, first)
		}
		// WriteGet fills in what a reply may leave out (protocol_version),
		// so compare its output, not the statuses.
		var again bytes.Buffer
		WriteGet(&again, g2.finish())
		writeErrno(&again, 0)
		if !bytes.Equal(first, again.Bytes()) {
			t.Fatalf("round trip differs:\nfirst  %s\nsecond %s", first, again.Bytes())
		}
	})
}

func checkReplyError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ie *Error
	if !errors.As(err, &ie) || ie.Errno >= 0 {
		t.Fatalf("error %v is not an *Error with a negative errno", err)
	}
}
