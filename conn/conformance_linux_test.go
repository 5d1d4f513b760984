package conn_test

import (
	"testing"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/internal/conntest"
)

// The Linux bind passes the suite with each offload combination and with a
// batch small enough that GSO runs, GRO leftovers and chunking all cross
// batch boundaries.
func TestLinuxConformance(t *testing.T) {
	for name, o := range map[string]conn.Options{
		"Offloads":   {},
		"NoOffload":  {DisableGSO: true, DisableGRO: true},
		"GSOOnly":    {DisableGRO: true},
		"GROOnly":    {DisableGSO: true},
		"SmallBatch": conn.Sized(conn.Options{}, 7, 2, 1),
	} {
		t.Run(name, func(t *testing.T) {
			conntest.Run(t, func(t *testing.T) (a, b conn.Bind) {
				return conn.NewLinux(o), conn.NewLinux(o)
			})
		})
	}
}
