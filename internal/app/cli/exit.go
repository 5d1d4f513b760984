package cli

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/app/exit"
	"github.com/fips-go/fips-go/internal/app/metrics"
	"github.com/fips-go/fips-go/internal/app/rootless"
	"github.com/fips-go/fips-go/internal/engine"
	"github.com/fips-go/fips-go/tun/netstack"
	"github.com/urfave/cli/v3"
)

// The rootless exit (userspace --exit): the peers' TCP and UDP to other
// addresses leave through this host's sockets.

func exitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "exit", Usage: "relay the peers' TCP and UDP to any address the policy allows through this host's sockets (a WireGuard server or exit without root)"},
		&cli.StringSliceFlag{Name: "exit-allow", Usage: "CIDR,...: destinations --exit may reach (default: all; loopback, this host's own addresses, link-local and cloud metadata only when named here)"},
		&cli.StringSliceFlag{Name: "exit-deny", Usage: "CIDR,...: destinations --exit refuses (wins over --exit-allow)"},
		&cli.IntFlag{Name: "exit-max-flows", Value: exit.DefaultMaxFlows, Usage: "TCP and UDP flows --exit relays at once"},
		&cli.IntFlag{Name: "exit-max-flows-per-peer", Value: exit.DefaultMaxFlowsPerPeer, Usage: "TCP and UDP flows --exit relays at once for one peer"},
	}
}

// exitOptions are the --exit flags, parsed.
type exitOptions struct {
	on                bool
	allow, deny       []netip.Prefix
	maxFlows, perPeer int
}

func exitOptionsFrom(c *cli.Command) (exitOptions, error) {
	o := exitOptions{on: c.Bool("exit"), maxFlows: int(c.Int("exit-max-flows")), perPeer: int(c.Int("exit-max-flows-per-peer"))}
	var err error
	if o.allow, err = parseCIDRs("--exit-allow", c.StringSlice("exit-allow")); err != nil {
		return o, err
	}
	if o.deny, err = parseCIDRs("--exit-deny", c.StringSlice("exit-deny")); err != nil {
		return o, err
	}
	if o.maxFlows < 1 || o.perPeer < 1 {
		return o, fmt.Errorf("--exit-max-flows and --exit-max-flows-per-peer must be positive")
	}
	if !o.on && (len(o.allow)+len(o.deny) > 0 || c.IsSet("exit-max-flows") || c.IsSet("exit-max-flows-per-peer")) {
		return o, fmt.Errorf("--exit-allow, --exit-deny and --exit-max-flows* need --exit")
	}
	return o, nil
}

// parseCIDRs reads flag values, each a comma-separated list of prefixes
// or addresses (a single host).
func parseCIDRs(flag string, vals []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range vals {
		for f := range strings.SplitSeq(v, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			p, err := netip.ParsePrefix(f)
			if err != nil {
				a, aerr := netip.ParseAddr(f)
				if aerr != nil {
					return nil, fmt.Errorf("%s %q: want a CIDR like 10.0.0.0/8 or an address", flag, f)
				}
				p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// startExit starts the relay on tn for o. The metrics port and the
// device's listen port (read afresh, as UAPI may change it) are the
// exit's own listening sockets, which the policy protects.
func startExit(tn *engine.Engine, o userspaceOptions) (*exit.Exit, error) {
	var self []uint16
	if _, port, err := net.SplitHostPort(o.metrics.addr); err == nil {
		if p, err := strconv.ParseUint(port, 10, 16); err == nil {
			self = append(self, uint16(p))
		}
	}
	pol := exit.NewPolicy(exit.PolicyOptions{
		Allow: o.exit.allow, Deny: o.exit.deny, SelfPorts: self, Tunnel: o.addrs,
	})
	host := func() exit.HostState {
		return exit.HostState{Prefixes: exit.InterfacePrefixes(), Ports: []uint16{tn.Device.Status().ListenPort}}
	}
	dns := hostResolvers("/etc/resolv.conf")
	if len(dns) == 0 {
		o.notef("exit: no name server in /etc/resolv.conf; DNS to %v is refused", o.addrs)
	}
	peerOf := func(a netip.Addr) (string, bool) {
		k, ok := tn.Device.PeerFor(a)
		if !ok {
			return "", false
		}
		return k.String(), true
	}
	ex, err := exit.Start(tn.Net, exit.Options{
		Policy: pol, PeerOf: peerOf, MaxFlows: o.exit.maxFlows, MaxFlowsPerPeer: o.exit.perPeer,
		TCPIdleTimeout: o.idleExit, DNS: dns, Tunnel: o.addrs, Host: host, Logf: o.logf, Notef: o.notef,
	})
	if err != nil {
		return nil, err
	}
	o.notef("exit: relaying the peers' TCP, UDP and ping through this host (flows: %d at once, %d per peer)", o.exit.maxFlows, o.exit.perPeer)
	return ex, nil
}

// showCounters are a mode's counters (the exit's, the proxies') as
// device counters (`fips-go show`).
func showCounters(src func() []exit.Counter) func() []device.Counter {
	return func() []device.Counter {
		cs := src()
		out := make([]device.Counter, len(cs))
		for i, c := range cs {
			out[i] = device.Counter{Name: c.Name, Value: c.Value}
		}
		return out
	}
}

// metricSamples are a mode's counters as metrics series.
func metricSamples(src func() []exit.Counter) func() []metrics.Sample {
	return func() []metrics.Sample {
		cs := src()
		out := make([]metrics.Sample, len(cs))
		for i, c := range cs {
			out[i] = metrics.Sample{Name: c.Family, Help: c.Help, Gauge: c.Gauge, Labels: c.Labels, Value: c.Value}
		}
		return out
	}
}

// joinCounters reads every source in turn.
func joinCounters(srcs ...func() []exit.Counter) func() []exit.Counter {
	return func() []exit.Counter {
		var out []exit.Counter
		for _, src := range srcs {
			out = append(out, src()...)
		}
		return out
	}
}

// socksCounters are the SOCKS5 proxy's refusals and drops by reason, in
// the exit's counter shape, read from the services once they run (none
// before, or without a SOCKS5 proxy). udp_wrong_owner counts datagrams
// another local user's socket sent to a client's UDP relay.
func socksCounters(svc *atomic.Pointer[rootless.Services]) func() []exit.Counter {
	return func() []exit.Counter {
		s := svc.Load()
		if s == nil {
			return nil
		}
		st, ok := s.SOCKS5Stats()
		if !ok {
			return nil
		}
		const help = "Connections and datagrams the SOCKS5 proxy refused or dropped, by reason."
		c := func(reason string, v uint64) exit.Counter {
			return exit.Labelled("socks5_dropped", "reason", reason, help, v)
		}
		return []exit.Counter{
			c("conn_limit", st.Refused),
			c("protocol_error", st.ProtocolErrors),
			c("udp_foreign", st.UDPForeign),
			c("udp_wrong_owner", st.UDPWrongOwner),
			c("udp_malformed", st.UDPMalformed),
			c("udp_unresolvable", st.UDPUnresolvable),
		}
	}
}

// netstackCounters are the userspace stack's TCP retransmissions and what
// ACK thinning (netstack.Options.ACKHold, on for the exit) did.
func netstackCounters(n *netstack.Net) func() []exit.Counter {
	return func() []exit.Counter {
		st := n.Stats()
		const help = "Peers' pure TCP ACKs the userspace stack held back, dropped as superseded by a newer ACK of their flow, or delivered late."
		c := func(what string, v uint64) exit.Counter {
			return exit.Labelled("netstack_acks", "action", what, help, v)
		}
		return []exit.Counter{
			{Name: "netstack_tcp_retransmits", Family: "netstack_tcp_retransmits", Help: "TCP segments the userspace stack retransmitted.", Value: st.TCPRetransmits},
			{Name: "netstack_tcp_spurious_recoveries", Family: "netstack_tcp_spurious_recoveries", Help: "Loss recoveries of the userspace stack that the peer's duplicate reports showed were needless.", Value: st.TCPSpuriousRecoveries},
			c("held", st.ACKsHeld),
			c("superseded", st.ACKsSuperseded),
			c("released", st.ACKsReleased),
		}
	}
}

// hostResolvers are the name servers of a resolv.conf, port 53.
func hostResolvers(path string) []netip.AddrPort {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []netip.AddrPort
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil && a.Zone() == "" {
				out = append(out, netip.AddrPortFrom(a.Unmap(), 53))
			}
		}
	}
	return out
}
