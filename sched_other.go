//go:build !linux

package main

import "errors"

// raiseScheduling is Linux-only; elsewhere the scheduler is left alone.
func raiseScheduling() error { return errors.New("real-time scheduling is only set on Linux") }
