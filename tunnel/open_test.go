package tunnel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/tunnel"
)

// freeUDPPort is a loopback UDP port nobody holds now.
func freeUDPPort(t *testing.T) uint16 {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

// Options.Device.ListenPort is the port the tunnel listens on, though the
// wg-quick parser gives every configuration a ListenPort (0 when the file
// has none).
func TestOpenListenPortOption(t *testing.T) {
	port := freeUDPPort(t)
	sk, ck := newKey(), newKey()
	tn := open(t, serverConf(sk, ck), tunnel.Options{Logf: t.Logf, Device: device.Options{ListenPort: port}})
	if got := tn.Status().ListenPort; got != port {
		t.Fatalf("listening on %d, want Options.Device.ListenPort %d", got, port)
	}
}

// A port that cannot be had is an error matching device.ErrPortInUse,
// from the option as from the file.
func TestOpenPortInUse(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	port := c.LocalAddr().(*net.UDPAddr).Port
	sk, ck := newKey(), newKey()
	conf := serverConf(sk, ck)
	withPort := strings.Replace(string(conf), "[Interface]\n", fmt.Sprintf("[Interface]\nListenPort = %d\n", port), 1)
	for name, o := range map[string]struct {
		conf []byte
		opts tunnel.Options
	}{
		"file":   {[]byte(withPort), tunnel.Options{}},
		"option": {conf, tunnel.Options{Device: device.Options{ListenPort: uint16(port)}}},
	} {
		tn, err := tunnel.OpenBytes(context.Background(), o.conf, o.opts)
		if err == nil {
			tn.Close()
			t.Fatalf("%s: opened on port %d, which is taken", name, port)
		}
		if !errors.Is(err, device.ErrPortInUse) {
			t.Errorf("%s: %v does not match device.ErrPortInUse", name, err)
		}
	}
}

// The wg-quick lines a tunnel ignores are logged, so that a user learns
// why their PostUp did nothing.
func TestOpenLogsIgnoredLines(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logf := func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	sk, ck := newKey(), newKey()
	conf := strings.Replace(string(serverConf(sk, ck)), "[Interface]\n", "[Interface]\nPostUp = echo hi\nTable = off\n", 1)
	open(t, []byte(conf), tunnel.Options{Logf: logf})
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		if strings.Contains(l, "PostUp") && strings.Contains(l, "Table") {
			return
		}
	}
	t.Fatalf("no log line names the ignored PostUp and Table; got %q", lines)
}
