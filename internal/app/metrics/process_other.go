//go:build !linux

package metrics

// series adds the process_* series; without /proc there are none.
func (p *procInfo) series(e *exposition) {}
