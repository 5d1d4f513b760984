//go:build !unix && !windows

package conn

// truncated cannot tell a cut datagram on this platform; none is reported.
func truncated(int, error) bool { return false }
