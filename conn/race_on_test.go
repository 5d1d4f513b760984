//go:build race

package conn

// The race detector allocates on its own; allocation counts are checked
// only without it.
const raceEnabled = true
