package conn_test

import (
	"testing"

	"github.com/fips-go/fips-go/conn"
)

func BenchmarkLoopbackGSO(b *testing.B) {
	benchLoopback(b, conn.NewLinux(conn.Options{}), conn.NewLinux(conn.Options{}))
}

func BenchmarkLoopbackNoOffload(b *testing.B) {
	o := conn.Options{DisableGSO: true, DisableGRO: true}
	benchLoopback(b, conn.NewLinux(o), conn.NewLinux(o))
}

// GSO without GRO: the kernel splits on receive, so this isolates what
// each offload contributes.
func BenchmarkLoopbackGSOOnly(b *testing.B) {
	benchLoopback(b, conn.NewLinux(conn.Options{}), conn.NewLinux(conn.Options{DisableGRO: true}))
}
