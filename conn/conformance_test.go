package conn_test

import (
	"testing"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/internal/conntest"
)

func TestStdConformance(t *testing.T) {
	conntest.Run(t, func(t *testing.T) (a, b conn.Bind) {
		return conn.NewStd(conn.Options{}), conn.NewStd(conn.Options{})
	})
}

func TestDefaultConformance(t *testing.T) {
	conntest.Run(t, func(t *testing.T) (a, b conn.Bind) {
		return conn.NewDefault(conn.Options{}), conn.NewDefault(conn.Options{})
	})
}
