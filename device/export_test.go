package device

// Hooks for the external tests (package device_test) into knobs that are
// not part of the API.

// SetLimits sets the caps on peers and allowed IPs (0 leaves a default).
func SetLimits(o *Options, peers, allowedIPs int) {
	o.maxPeers, o.maxAllowedIPs = peers, allowedIPs
}
