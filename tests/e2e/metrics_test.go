package e2e

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// TestMetricsEndpoint: a daemon started as wg-quick would start it, with
// FIPS_GO_METRICS=:9586 in its environment, serves Prometheus metrics on
// loopback in its namespace, and they follow the traffic. A second daemon
// asking for the same port fails at once instead of daemonizing.
func TestMetricsEndpoint(t *testing.T) {
	requireTool(t, "curl")
	im := fipsGo(t)
	im.env = []string{"FIPS_GO_METRICS=:9586"}
	p := newPair(t, pairOpts{implA: im, noV6Overlay: true})
	p.a.ns.waitPing(p.b.tun4, 10*time.Second)
	p.a.ns.ping(p.b.tun4, 5, 1000, false, "-i", "0.2")

	scrape := p.a.ns.Run("curl", "-sf", "http://127.0.0.1:9586/metrics")
	sent := metricValue(t, scrape, fmt.Sprintf(`fipsgo_peer_sent_bytes_total{interface=%q,peer=%q}`, p.a.iface, p.b.key.pub))
	if sent < 5*1000 {
		t.Errorf("peer sent bytes %v after 5 pings of 1000 bytes\n%s", sent, scrape)
	}
	if v := metricValue(t, scrape, fmt.Sprintf(`fipsgo_handshakes_completed_total{interface=%q}`, p.a.iface)); v < 1 {
		t.Errorf("handshakes completed %v", v)
	}
	// The same figure wg reads over UAPI (transfer may have moved since).
	if wgTx := p.a.peer(p.b).tx; float64(wgTx) < sent {
		t.Errorf("wg says %d bytes sent, metrics said %v before it", wgTx, sent)
	}
	if !strings.Contains(scrape, "# TYPE fipsgo_dropped_packets_total counter") {
		t.Errorf("no counter type for the drop family\n%s", scrape)
	}
	// Not reachable from outside the namespace's loopback.
	if out, err := p.b.ns.Try("curl", "-sf", "-m", "2", "http://"+p.link.addrA().String()+":9586/metrics"); err == nil {
		t.Errorf("metrics reachable over the veth: %s", out)
	}

	name := netnstest.UniqueName("metrC")
	cmd := p.a.ns.Command(t.Context(), "env", "FIPS_GO_METRICS=:9586", binPath(t, binFipsGo), name)
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); !ok || !strings.Contains(string(out), "address already in use") {
		t.Errorf("a second daemon on the same metrics port: %v\n%s", err, out)
	}
	if pid := findDaemon(binPath(t, binFipsGo), name); pid != 0 {
		t.Errorf("a daemon for %s runs (pid %d) although its metrics port was taken", name, pid)
	}
}

// metricValue is the value on the line that starts with series, failing
// the test when there is none.
func metricValue(t *testing.T, scrape, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(scrape, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no %s in\n%s", series, scrape)
	return 0
}
