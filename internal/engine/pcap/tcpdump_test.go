package pcap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/memtun"
)

// TestTcpdumpReadsCapture has tcpdump, the reader users will reach for,
// read a capture of both directions: it must name every packet and show
// the clock's nanoseconds.
func TestTcpdumpReadsCapture(t *testing.T) {
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		t.Skip("tcpdump is not installed: the file format is checked by the other tests only")
	}
	path := filepath.Join(t.TempDir(), "tunnel.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := time.Unix(1700000000, 123456789)
	w, err := NewWriter(f, func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	mem := memtun.New("", 0, 0)
	dev := Wrap(mem, w)
	for i := range 2 {
		if err := mem.Inject(outbound(i)); err != nil {
			t.Fatal(err)
		}
	}
	bufs, sizes := readBufs(2)
	if n, err := dev.Read(bufs, sizes, tun.Headroom); err != nil || n != 2 {
		t.Fatalf("Read: %d, %v", n, err)
	}
	if _, err := dev.Write(withHeadroom(inbound(0), inbound(1)), tun.Headroom); err != nil {
		t.Fatal(err)
	}
	// The file is read while the device is still open: per-batch flushing
	// is what makes a running capture readable.
	cmd := exec.Command(tcpdump, "-r", path, "-n", "-tt", "--time-stamp-precision=nano")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tcpdump: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "link-type RAW") {
		t.Errorf("tcpdump does not see a raw IP capture: %s", stderr.String())
	}
	// Only what every tcpdump version prints the same way is compared.
	want := []string{
		"1700000000.123456789 IP 10.0.0.1.1234 > 10.0.0.2.5678: UDP, length 5",
		"1700000000.123456789 IP6 fd00::1 > fd00::2: ICMP6, echo request",
		"1700000000.123456789 IP 10.0.0.2.5678 > 10.0.0.1.1234: UDP, length 4",
		"1700000000.123456789 IP6 fd00::2 > fd00::1: ICMP6, echo reply",
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != len(want) {
		t.Fatalf("tcpdump printed %d lines, want %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("tcpdump line %d: %q, want it to start %q", i, got[i], want[i])
		}
	}
	dev.Close()
}
