package exit

// Counter is one named value of the exit. Name is flat, for `fips-go
// show`; Family and Labels are the same value as a metrics series. A
// Gauge goes up and down, the others only up.
type Counter struct {
	Name   string
	Family string
	Labels []string // name, value pairs
	Help   string
	Value  uint64
	Gauge  bool
}

// Labelled is a counter of family with one label; its name in show is the
// family and the label's value joined by "_" (exit_refused_denied).
func Labelled(family, label, value, help string, v uint64) Counter {
	return Counter{Name: family + "_" + value, Family: family, Labels: []string{label, value}, Help: help, Value: v}
}

// Counters returns the exit's counters in a stable order: flows open and
// opened by protocol, bytes each way, port unreachables relayed, relay
// buffer bytes holding data, then refusals by reason (every reason, zeros
// included).
func (e *Exit) Counters() []Counter {
	c := &e.ctr
	const (
		openHelp   = "Flows the exit relays now."
		openedHelp = "Flows the exit has opened."
		bytesHelp  = "Bytes the exit relayed."
	)
	out := make([]Counter, 0, 12+int(numReasons))
	protos := []string{"tcp", "udp", "icmp"}
	for p, name := range protos {
		out = append(out, Counter{"exit_" + name + "_flows_open", "exit_flows_open", []string{"protocol", name}, openHelp, uint64(max(c.open[p].Load(), 0)), true})
	}
	for p, name := range protos {
		out = append(out, Counter{"exit_" + name + "_flows_opened", "exit_flows_opened", []string{"protocol", name}, openedHelp, uint64(c.opened[p].Load()), false})
	}
	out = append(out,
		Labelled("exit_bytes", "direction", "to_host", bytesHelp, c.toHost.Load()),
		Labelled("exit_bytes", "direction", "to_peer", bytesHelp, c.toPeer.Load()),
		Counter{"exit_port_unreachables_to_peer", "exit_port_unreachables", nil, "ICMP port unreachables the host got for peers' UDP and relayed to them.", c.unreachToPeer.Load(), false},
		Counter{"exit_tcp_handshakes_pending", "exit_tcp_handshakes_pending", nil, "Peers' SYNs waiting for the host's connect or the peer's handshake now.", uint64(max(c.synsPending.Load(), 0)), true},
		Counter{"exit_tcp_handshakes_failed", "exit_tcp_handshakes_failed", nil, "TCP flows whose host connect succeeded but whose peer did not complete the handshake in time.", c.handshakeFail.Load(), false},
		Counter{"exit_relay_buffer_bytes", "exit_relay_buffer_bytes", nil, "Relay buffer bytes holding data now.", uint64(max(c.bufInUse.Load(), 0)), true},
	)
	for r := reasonOK + 1; r < numReasons; r++ {
		out = append(out, Labelled("exit_refused", "reason", r.String(), "Flows the exit refused, by reason.", c.refused[r].Load()))
	}
	return out
}

// Refused is how many flows were refused for r.
func (e *Exit) Refused(r Reason) uint64 {
	if r <= reasonOK || r >= numReasons {
		return 0
	}
	return e.ctr.refused[r].Load()
}
