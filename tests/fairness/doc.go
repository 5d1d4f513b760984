// Package fairness holds the fairness-and-scale benchmark: one gateway
// device with 1,000 configured peers, 100 of which carry traffic at once
// through an in-memory bind and TUN, in both directions. It measures each
// sending peer's delivered share against the fair share (min, median,
// max, Jain's index, peers below half) with all 100 equal and with one
// heavy peer offering 10x as much as each of 99 light ones.
//
// The test runs each scenario for 2 s and asserts only structural facts
// (every sending peer got packets through); FIPS_FAIRNESS=1 runs the 10 s
// benchmark, FIPS_FAIRNESS_DURATION (a Go duration) sets another length.
// Both print the table.
package fairness
