package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v3"
)

// The rootless mode forwards a local TCP port through the tunnel to a
// service on the far side, with no root and no TUN.
func TestUserspaceForward(t *testing.T) {
	far, err := newBenchNode(netip.MustParseAddr("10.0.0.1"), 1420)
	if err != nil {
		t.Fatal(err)
	}
	defer far.close()
	// An echo service inside the tunnel, on the far side.
	ln, err := far.ns.ListenTCPAddrPort(netip.MustParseAddrPort("10.0.0.1:7"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()

	// This side's key and config file, as a user would write them.
	near, err := newBenchNode(netip.MustParseAddr("10.0.0.9"), 1420) // only for a key pair
	if err != nil {
		t.Fatal(err)
	}
	near.close()
	nearPub := near.key.PublicKey()
	farPub := far.key.PublicKey()
	conf := filepath.Join(t.TempDir(), "wg0.conf")
	text := fmt.Sprintf("[Interface]\nPrivateKey = %s\nAddress = 10.0.0.2/24\nMTU = 1400\n\n[Peer]\nPublicKey = %s\nEndpoint = 127.0.0.1:%d\nAllowedIPs = 10.0.0.1/32\n",
		near.key.Base64(), farPub.String(), far.dev.Status().ListenPort)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := far.peerWithKey(nearPub, netip.MustParseAddr("10.0.0.2")); err != nil {
		t.Fatal(err)
	}

	// A free loopback port for the metrics endpoint.
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := pl.Addr().String()
	pl.Close()

	app := newApp()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- runUserspaceArgs(ctx, app, []string{"fips-go", "userspace", "--config", conf,
			"--forward", "127.0.0.1:0=10.0.0.1:7", "--socket-dir", "none", "--metrics", metricsAddr}, func(a []net.Addr) { ready <- a[0] })
	}()
	var local net.Addr
	select {
	case local = <-ready:
	case err := <-done:
		t.Fatalf("userspace mode exited: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("userspace mode not ready within 10s")
	}
	c, err := net.Dial("tcp", local.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	msg := []byte("through the tunnel and back")
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("no echo through the forward: %v", err)
	}
	if string(got) != string(msg) {
		t.Fatalf("echo %q, want %q", got, msg)
	}
	// --metrics serves the device: the peer carried the echo.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf(`fipsgo_peer_sent_bytes_total{interface="fipsgo0",peer=%q} `, farPub.String())
	line := ""
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, want) {
			line = l
		}
	}
	if line == "" || strings.HasSuffix(line, " 0") {
		t.Fatalf("metrics: want a non-zero %s...; got:\n%s", want, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("userspace mode returned %v after cancel", err)
	}
}

// runUserspaceArgs runs the CLI with args and a readiness callback.
func runUserspaceArgs(ctx context.Context, app *cli.Command, args []string, ready func([]net.Addr)) error {
	return app.Run(context.WithValue(context.WithValue(ctx, readyKey{}, ready), inProcessKey{}, true), args)
}

// A wg-quick file without Address cannot run, and the error says what to add.
func TestUserspaceNeedsAddress(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "wg0.conf")
	if err := os.WriteFile(conf, []byte("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := runUserspaceArgs(context.Background(), newApp(), []string{"fips-go", "userspace", "-c", conf, "--socket-dir", "none"}, nil)
	if err == nil || !strings.Contains(err.Error(), "no Address") {
		t.Fatalf("got %v, want an error about the missing Address", err)
	}
}

func TestUserspaceCmdRefusesNetstackFlags(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "wg0.conf")
	if err := os.WriteFile(conf, []byte("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\nAddress = 10.0.0.2/24\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := runUserspaceArgs(context.Background(), newApp(), []string{"fips-go", "userspace", "-c", conf, "--socks5", "1080", "--", "true"}, nil)
	if err == nil || !strings.Contains(err.Error(), "do not combine") {
		t.Fatalf("got %v", err)
	}
}

func TestLoopbackResolvers(t *testing.T) {
	got := loopbackResolvers("# comment\nnameserver 127.0.0.53\nnameserver 10.0.0.1\nnameserver ::1\noptions edns0\n")
	if strings.Join(got, ",") != "127.0.0.53,::1" {
		t.Fatalf("got %v", got)
	}
}
