package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNDPIDoesNotSeeWireGuard: nDPI, the DPI library censors' boxes build
// on, names a plain fips-go tunnel's underlay WireGuard and does not name
// an obfuscated one so. Each capture holds the handshake (the tunnel is
// brought up while tcpdump runs), pings and a TCP transfer.
func TestNDPIDoesNotSeeWireGuard(t *testing.T) {
	requireRoot(t)
	requireTool(t, "tcpdump", "ndpiReader")
	for _, c := range []struct {
		name string
		obfs []string
	}{
		{"plain", nil},
		{"awg1.0", awgArgs},
		{"awg2.0", awg2Args},
	} {
		t.Run(c.name, func(t *testing.T) {
			pcap := filepath.Join(t.TempDir(), c.name+".pcap")
			protos := ndpiProtocols(t, captureTunnel(t, c.obfs, pcap))
			wg := false
			for _, p := range protos {
				if strings.EqualFold(p, "WireGuard") {
					wg = true
				}
			}
			t.Logf("nDPI on the %s underlay: %v", c.name, protos)
			if len(protos) == 0 {
				t.Fatalf("nDPI reported no protocol at all for %s", pcap)
			}
			if plain := c.obfs == nil; wg != plain {
				t.Fatalf("nDPI says WireGuard=%v for the %s tunnel, want %v (protocols %v)", wg, c.name, plain, protos)
			}
		})
	}
}

// captureTunnel brings up a fips-go pair with obfs on both ends while
// tcpdump writes A's veth to pcap, sends pings and 2 MiB of TCP through
// the tunnel, and returns pcap once tcpdump has flushed it.
func captureTunnel(t *testing.T, obfs []string, pcap string) string {
	t.Helper()
	o := pairOpts{obfsA: obfs, obfsB: obfs, noV6Overlay: true, onlyAKnows: true}
	p := newPair(t, o)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := p.a.ns.Command(ctx, "tcpdump", "-i", p.link.ifA, "-w", pcap, "-U", "-n", "udp")
	cmd.Stderr = new(strings.Builder)
	if err := cmd.Start(); err != nil {
		t.Fatalf("tcpdump: %v", err)
	}
	eventually(t, 5*time.Second, "tcpdump to start", func() bool {
		return strings.Contains(cmd.Stderr.(*strings.Builder).String(), "listening on")
	})
	p.a.ns.waitPing(p.b.tun4, 20*time.Second)
	p.a.ns.ping(p.b.tun4, 5, 1000, false, "-i", "0.05")
	tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5005), helperSpec{Bytes: 2 << 20, Seed: 25})
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	if st, err := os.Stat(pcap); err != nil || st.Size() < 1000 {
		t.Fatalf("capture %s: %v (stat %v)\n%s", pcap, err, st, cmd.Stderr)
	}
	return pcap
}

// ndpiProtocols runs ndpiReader over pcap with guessing by port off (the
// pair listens on WireGuard's port 51820, which says nothing about the
// bytes) and returns the protocols of its "Detected protocols" section.
func ndpiProtocols(t *testing.T, pcap string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ndpiReader", "-d", "-i", pcap).CombinedOutput()
	if err != nil {
		t.Fatalf("ndpiReader: %v\n%s", err, out)
	}
	var protos []string
	_, detected, ok := strings.Cut(string(out), "Detected protocols:")
	if !ok {
		t.Fatalf("ndpiReader printed no protocol section:\n%s", out)
	}
	for _, line := range strings.Split(detected, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != "packets:" {
			break
		}
		protos = append(protos, f[0])
	}
	return protos
}
