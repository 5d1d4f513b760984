//go:build !fipsgo_testtimers

package cli

import "github.com/fips-go/fips-go/device/timers"

// testTimerParams is the zero Params (the protocol's times) in every normal
// build; only a binary built with -tags fipsgo_testtimers can shorten them.
func testTimerParams() timers.Params { return timers.Params{} }
