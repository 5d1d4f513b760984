//go:build !linux

package conn

func newDefault(opts Options) Bind { return NewStd(opts) }
