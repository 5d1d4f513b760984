package cli

import (
	"bytes"
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/ipc"
)

// `fips-go show IFACE --watch` into a buffer (not a terminal): frames one
// after another, no escape codes, the peer's row with rates from the
// second frame on.
func TestShowWatch(t *testing.T) {
	a, err := newBenchNode(netip.MustParseAddr("10.99.0.1"), 1420)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	b, err := newBenchNode(netip.MustParseAddr("10.99.0.2"), 1420)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if err := a.peerWith(b); err != nil {
		t.Fatal(err)
	}
	if err := b.peerWith(a); err != nil {
		t.Fatal(err)
	}
	if _, err := warmUp(context.Background(), a, b); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Setenv("WG_SOCKET_DIR", dir)
	l, err := ipc.Listen(dir, "fwatch0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go l.Serve(a.dev, ipc.ServeOptions{})

	var out bytes.Buffer
	app := newApp()
	app.Writer = &out
	if err := app.Run(context.Background(), []string{"fips-go", "show", "--watch", "--count", "2", "--interval", "100ms", "fwatch0"}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.Contains(s, "\x1b") {
		t.Errorf("escape codes in output that is not a terminal: %q", s)
	}
	if n := strings.Count(s, "interface: fwatch0  peers: 1"); n != 2 {
		t.Errorf("%d frames, want 2:\n%s", n, s)
	}
	peer := b.key.PublicKey().String()
	if strings.Count(s, peer+"  127.0.0.1:") != 2 {
		t.Errorf("no row for peer %s with its endpoint in each frame:\n%s", peer, s)
	}
	frames := strings.Split(s, "\n\ninterface: ")
	if len(frames) != 2 || !strings.Contains(frames[0], "drops/s: -") || !strings.Contains(frames[1], "drops/s: none") {
		t.Errorf("first frame without rates, second with:\n%s", s)
	}
	if err := app.Run(context.Background(), []string{"fips-go", "show", "--watch", "all"}); err == nil {
		t.Error("--watch all accepted")
	}
}
