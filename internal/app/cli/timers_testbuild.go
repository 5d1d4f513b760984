//go:build fipsgo_testtimers

package cli

import (
	"os"
	"time"

	"github.com/fips-go/fips-go/device/timers"
)

// testTimerParams lets end-to-end tests shorten the protocol's times, e.g.
// FIPS_GO_TEST_REKEY_AFTER_TIME=3s to watch rekeys under traffic. It exists
// only in binaries built with -tags fipsgo_testtimers, so a production build
// cannot be switched into it by an environment variable.
func testTimerParams() timers.Params {
	d := func(k string) time.Duration {
		v, _ := time.ParseDuration(os.Getenv(k))
		return v
	}
	return timers.Params{
		RekeyAfterTime:   d("FIPS_GO_TEST_REKEY_AFTER_TIME"),
		RejectAfterTime:  d("FIPS_GO_TEST_REJECT_AFTER_TIME"),
		RekeyAttemptTime: d("FIPS_GO_TEST_REKEY_ATTEMPT_TIME"),
		RekeyTimeout:     d("FIPS_GO_TEST_REKEY_TIMEOUT"),
		KeepaliveTimeout: d("FIPS_GO_TEST_KEEPALIVE_TIMEOUT"),
	}
}
