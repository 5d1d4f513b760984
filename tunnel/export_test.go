package tunnel

import "github.com/fips-go/fips-go/tun/netstack"

// StackStats is the tunnel's netstack counters, for tests.
func StackStats(t *Tunnel) netstack.Stats { return t.net.Stats() }
