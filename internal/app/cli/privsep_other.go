//go:build !linux

package cli

import (
	"errors"
	"os"

	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/tun"
)

// separate is Linux's only: elsewhere the daemon runs as one process.
func separate(settings) bool { return false }

var errNoPrivsep = errors.New("privilege separation is Linux's only")

func monitorForeground(string, tun.Device, *ipc.Listener, metricsConfig, settings) error {
	return errNoPrivsep
}

func runMonitor(string, *os.File, *os.File, *os.File, settings) error { return errNoPrivsep }

func workerRole(tun.Device, *os.File) (daemonRole, error) { return daemonRole{}, errNoPrivsep }
