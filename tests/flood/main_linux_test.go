//go:build linux

package flood

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the attacker that runs inside its own
	// namespace (see attackrun_linux_test.go) and as the sink that holds
	// an unread socket in the victim's (sink_linux_test.go).
	if spec := os.Getenv(attackerEnv); spec != "" {
		os.Exit(attackerMain(spec))
	}
	if port := os.Getenv(sinkEnv); port != "" {
		os.Exit(sinkMain(port))
	}
	os.Exit(m.Run())
}
