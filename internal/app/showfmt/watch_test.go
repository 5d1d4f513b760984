package showfmt_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/app/showfmt"
)

func TestFormatWatch(t *testing.T) {
	now := time.Unix(1700000000, 0)
	prev := showStatus()
	prev.Counters = []device.Counter{{Name: "rx_drop_replayed", Value: 10}, {Name: "tx_drop_no_route", Value: 5}, {Name: "handshakes_completed", Value: 1}}
	cur := showStatus()
	cur.Peers = append([]device.PeerStatus(nil), cur.Peers...)
	cur.Peers[1].RxBytes += 2_500_000 // 10 Mbit/s over 2 s
	cur.Peers[0].TxBytes += 250_000   // 1 Mbit/s
	cur.Counters = []device.Counter{{Name: "rx_drop_replayed", Value: 30}, {Name: "tx_drop_no_route", Value: 6}, {Name: "handshakes_completed", Value: 9}}
	var b bytes.Buffer
	if err := showfmt.FormatWatch(&b, "wg0", prev, cur, 2*time.Second, now, showfmt.WatchOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if lines[0] != "interface: wg0  peers: 3  rx 10.00  tx 1.00 Mbit/s" {
		t.Errorf("header %q", lines[0])
	}
	// Busiest first: peer 4 (10 Mbit/s in), peer 2 (1 out), peer 5 (idle).
	for i, want := range []string{b64(4), b64(2), b64(5)} {
		if !strings.HasPrefix(lines[3+i], want) {
			t.Errorf("row %d is %q, want peer %s", i, lines[3+i], want)
		}
	}
	for _, want := range []string{"10.00        0.00  1m3s ago", "0.00        1.00  ", "[fe80::1%eth0]:51820", "never"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	if want := "drops/s: rx_drop_replayed 10.0, tx_drop_no_route 0.5\n"; !strings.HasSuffix(b.String(), want) {
		t.Errorf("want it to end with %q:\n%s", want, b.String())
	}

	// The first frame has nothing to compare with.
	b.Reset()
	showfmt.FormatWatch(&b, "wg0", device.Status{}, cur, 0, now, showfmt.WatchOptions{MaxPeers: 1})
	if !strings.Contains(b.String(), "rx -  tx - Mbit/s") || !strings.Contains(b.String(), "(2 more peers)") || !strings.Contains(b.String(), "drops/s: -") {
		t.Errorf("first frame:\n%s", b.String())
	}
}

// A peer removed and added again between frames counts from zero instead
// of showing a huge rate.
func TestFormatWatchCounterWentDown(t *testing.T) {
	prev, cur := showStatus(), showStatus()
	cur.Peers = append([]device.PeerStatus(nil), cur.Peers...)
	cur.Peers[2].TxBytes = 125_000 // was 5 TiB
	var b bytes.Buffer
	showfmt.FormatWatch(&b, "wg0", prev, cur, time.Second, time.Unix(1700000000, 0), showfmt.WatchOptions{})
	if !strings.Contains(b.String(), "tx 1.00 Mbit/s") {
		t.Errorf("want 1 Mbit/s after a reset:\n%s", b.String())
	}
}

// A fips-go daemon's packet counters give the device's packets/s in the
// header; a daemon without them (wireguard-go) shows none.
func TestFormatWatchPacketRates(t *testing.T) {
	now := time.Unix(1000, 0)
	prev := device.Status{Counters: []device.Counter{{Name: "rx_packets", Value: 100}, {Name: "tx_packets", Value: 50}}}
	cur := device.Status{Counters: []device.Counter{{Name: "rx_packets", Value: 300}, {Name: "tx_packets", Value: 250}}}
	var b strings.Builder
	if err := showfmt.FormatWatch(&b, "wg0", prev, cur, 2*time.Second, now, showfmt.WatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "rx 100  tx 100 packets/s") {
		t.Fatalf("no packet rates in:\n%s", b.String())
	}
	b.Reset()
	showfmt.FormatWatch(&b, "wg0", device.Status{Peers: []device.PeerStatus{}}, device.Status{}, 2*time.Second, now, showfmt.WatchOptions{})
	if strings.Contains(b.String(), "packets/s") {
		t.Fatalf("packet rates without counters:\n%s", b.String())
	}
}
