package ipc

import (
	"fmt"

	"github.com/fips-go/fips-go/device"
)

// fips-go's key for path-MTU probes, per peer (device.PeerConfig.PathProbes):
// on for peers that run fips-go and answer them, off for stock peers, which
// would see them. A get=1 reply carries it only for a peer that set it; a
// get=fips reply says, per probed peer, path_probes=true.
//
//	UAPI               config file          fips-go set
//	fips_path_probes=  PathProbes =         path-probes     [Peer]: true or false
const uapiPathProbes = "fips_path_probes"

// parsePathProbes reads "true" or "false", strictly.
func parsePathProbes(v string) (*bool, error) {
	switch v {
	case "true":
		on := true
		return &on, nil
	case "false":
		return new(bool), nil
	}
	return nil, fmt.Errorf("%q is not true or false", shorten(v))
}

// appendPathProbes appends a peer's probe line, when the peer set one.
func appendPathProbes(b []byte, pp *bool) []byte {
	if pp == nil {
		return b
	}
	b = append(b, uapiPathProbes+"="...)
	b = fmt.Appendf(b, "%t\n", *pp)
	return b
}

// peerReported reports whether a peer has lines in a get=fips reply.
func peerReported(ps *device.PeerStatus) bool {
	return ps.PathProbesOn || ps.PathMTU > 0 && validCounterName(ps.PathMTUSource)
}
