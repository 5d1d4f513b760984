//go:build !linux

package userns

import (
	"fmt"
	"os"
)

// Session is a command running in its namespace; only Linux has them.
type Session struct {
	TUN int
}

// Start reports that user namespaces are a Linux feature.
func Start(o Options) (*Session, error) {
	return nil, fmt.Errorf("userns: %w: this is not Linux", ErrUnavailable)
}

// ChildMain is never reached outside Linux.
func ChildMain() { os.Exit(1) }

// Go, Signal, Wait and Abort exist for the API's sake.
func (s *Session) Go() error              { return ErrUnavailable }
func (s *Session) Signal(os.Signal) error { return ErrUnavailable }
func (s *Session) Wait() int              { return 1 }
func (s *Session) Abort()                 {}
func (s *Session) Pid() int               { return 0 }

// IsChild is false: there is no namespace child outside Linux.
func IsChild() bool { return false }
