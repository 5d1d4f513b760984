package exit

// Counter is one named value of the exit; a Gauge goes up and down, the
// others only up.
type Counter struct {
	Name  string
	Value uint64
	Gauge bool
}

// Counters returns the exit's counters in a stable order: flows open and
// opened by protocol, bytes each way, relay buffer bytes holding data,
// then refusals by reason (every reason, zeros included).
func (e *Exit) Counters() []Counter {
	c := &e.ctr
	out := []Counter{
		{"exit_tcp_flows_open", uint64(max(c.open[protoTCP].Load(), 0)), true},
		{"exit_udp_flows_open", uint64(max(c.open[protoUDP].Load(), 0)), true},
		{"exit_tcp_flows_opened", uint64(c.opened[protoTCP].Load()), false},
		{"exit_udp_flows_opened", uint64(c.opened[protoUDP].Load()), false},
		{"exit_bytes_to_host", c.toHost.Load(), false},
		{"exit_bytes_to_peer", c.toPeer.Load(), false},
		{"exit_relay_buffer_bytes", uint64(max(c.bufInUse.Load(), 0)), true},
	}
	for r := reasonOK + 1; r < numReasons; r++ {
		out = append(out, Counter{"exit_refused_" + r.String(), c.refused[r].Load(), false})
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
