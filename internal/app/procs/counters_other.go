//go:build !linux

package procs

import "errors"

type statReader struct{}

func newStatReader() (*statReader, error) {
	return nil, errors.New("no /proc/stat on this system")
}

func (*statReader) close() {}

func (*statReader) read() (counters, error) {
	return counters{}, errors.New("no /proc/stat on this system")
}
