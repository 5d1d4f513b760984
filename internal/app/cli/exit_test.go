package cli

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fips-go/fips-go/ipc"
)

func TestParseCIDRs(t *testing.T) {
	got, err := parseCIDRs("--exit-allow", []string{"10.0.0.0/8, 192.0.2.1", "2001:db8::/32", ""})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("2001:db8::/32")}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.0/8,nonsense"} {
		if _, err := parseCIDRs("--exit-deny", []string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestHostResolvers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(p, []byte("# x\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\nnameserver 2001:db8::53\nsearch example\nnameserver bad\n"), 0o644)
	got := hostResolvers(p)
	want := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.53:53"), netip.MustParseAddrPort("[2001:db8::53]:53")}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if hostResolvers(filepath.Join(t.TempDir(), "none")) != nil {
		t.Fatal("a missing file gives resolvers")
	}
}

// The exit's counters are served with the device's on the UAPI socket
// (what `fips-go show --counters` prints), and its flags are checked.
func TestUserspaceExitCounters(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(conf, []byte("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\nAddress = 10.0.0.1/24\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--exit-allow", "10.0.0.0/8"},
		{"--exit", "--exit-deny", "bogus"},
		{"--exit", "--exit-max-flows", "0"},
	} {
		err := runUserspaceArgs(context.Background(), newApp(), append([]string{"fips-go", "userspace", "-c", conf, "--socket-dir", "none"}, args...), nil)
		if err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	sock := filepath.Join(dir, "sock")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- runUserspaceArgs(ctx, newApp(), []string{"fips-go", "userspace", "-c", conf, "--socket-dir", sock, "--name", "exit0", "--exit"},
			func([]net.Addr) { ready <- struct{}{} })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("userspace --exit exited: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("userspace --exit returned %v", err)
		}
	}()
	c, err := ipc.Dial(sock, "exit0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctrs, err := c.Counters()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, ct := range ctrs {
		names[ct.Name] = true
	}
	for _, want := range []string{"exit_tcp_flows_open", "exit_udp_flows_opened", "exit_bytes_to_host", "exit_relay_buffer_bytes", "exit_refused_denied", "exit_refused_ping_unavailable"} {
		if !names[want] {
			t.Errorf("counters lack %s", want)
		}
	}
}
