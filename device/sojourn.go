package device

import (
	"time"

	"github.com/fips-go/fips-go/internal/hist"
)

// stage names a part of the data path whose sojourn time the device
// measures, per packet, from the moment a reader returned the packet to the
// moment it left the device.
type stage int

const (
	// stageTx: TUN read to the end of the UDP send that carried it.
	stageTx stage = iota
	// stageRx: UDP receive to the end of the TUN write that delivered it.
	stageRx
	numStages
)

var stageNames = [numStages]string{
	stageTx: "tx_pipeline",
	stageRx: "rx_pipeline",
}

// observe counts b's packets as having spent now-born in stage s. Batches
// that were not born in a reader (keepalives, staged packets) are left out.
func (d *Device) observe(s stage, b *batch, n int, now time.Time) {
	if n == 0 || b.born.IsZero() {
		return
	}
	d.sojourn[s].ObserveN(now.Sub(b.born), uint64(n))
}

// appendSojourn appends a histogram as cumulative counters named
// sojourn_NAME_us_le_BOUND, as a Prometheus histogram's buckets are: each
// counts the packets that waited at most BOUND microseconds ("inf": all);
// then sojourn_NAME_sum_ns, the total wait.
func appendSojourn(out []Counter, name string, s hist.Snapshot, sumNanos uint64) []Counter {
	var cum uint64
	for i, v := range s {
		cum += v
		out = append(out, Counter{Name: "sojourn_" + name + "_us_le_" + hist.Label(i), Value: cum})
	}
	return append(out, Counter{Name: "sojourn_" + name + "_sum_ns", Value: sumNanos})
}
