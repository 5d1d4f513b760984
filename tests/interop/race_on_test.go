//go:build race

package interop

// raceEnabled shrinks the transfers: the race detector makes the data path
// about ten times slower, and the races show up in the first megabytes.
const raceEnabled = true
