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
	//lint:ignore SA1032 the reversed order is the point: the wider error must not match the narrower one
	if errors.Is(net.ErrClosed, ErrBindClosed) {
		t.Fatal("net.ErrClosed must not match the narrower ErrBindClosed")
	}
}
