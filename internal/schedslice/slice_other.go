//go:build !linux

package schedslice

import (
	"errors"
	"time"
)

// Apply is Linux only: other systems have no per-thread slice request.
func Apply(slice time.Duration) (int, error) {
	return 0, errors.ErrUnsupported
}
