//go:build !linux

package e2e

import "errors"

// udpPMTU needs Linux's path-MTU socket options (pmtu_udp_linux_test.go).
func udpPMTU(helperSpec) (helperResult, error) {
	return helperResult{}, errors.New("udp-pmtu: Linux only")
}
