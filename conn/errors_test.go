package conn

import (
	"errors"
	"net"
	"testing"
)

// A caller that stops on a closed socket checks net.ErrClosed once; the
// bind's own sentinel must satisfy that check too.
func TestErrBindClosedIsNetErrClosed(t *testing.T) {
	if !errors.Is(ErrBindClosed, net.ErrClosed) {
		t.Fatal("errors.Is(ErrBindClosed, net.ErrClosed) is false")
	}
}
