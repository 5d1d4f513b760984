package metrics

import "sync"

// procInfo carries what the process_* series read only once per
// process: its start time does not change.
type procInfo struct {
	once  sync.Once
	start float64 // Unix seconds; 0 when unknown
}
