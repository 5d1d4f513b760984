package ipc

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

// QuickConfig is a wg-quick(8) configuration file: the wg(8) part, which
// configures the device, and the [Interface] keys wg-quick handles itself.
type QuickConfig struct {
	// Config is the wg(8) part with `wg setconf` semantics, as
	// ParseConfigFile returns it.
	Config *device.Config
	// Addresses are this side's tunnel addresses with their prefixes
	// (Address; an address without a prefix is a host prefix).
	Addresses []netip.Prefix
	// DNS are the name servers (the IP entries of DNS) and DNSSearch the
	// search domains (its other entries), in file order.
	DNS       []netip.Addr
	DNSSearch []string
	// MTU is 0 when the file names none.
	MTU int
	// Names are the peers whose Endpoint is a host name, as written, for
	// following the name when its address changes.
	Names map[noise.PublicKey]string
	// Ignored lists the wg-quick keys that were present but mean nothing
	// without root (Table, PreUp, PostUp, PreDown, PostDown, SaveConfig),
	// so that a caller can say so.
	Ignored []string
}

// maxQuickEntries bounds the Address and DNS lists of one file.
const maxQuickEntries = 1024

// ParseQuickConfigFile reads a wg-quick(8) configuration file: Address,
// DNS and MTU are taken from the [Interface] section (repeated keys
// accumulate, as in wg-quick), the hook keys are listed in Ignored, and the
// rest is parsed as strictly as ParseConfigFile does, with errors at the
// same line numbers.
func ParseQuickConfigFile(r io.Reader, name string, resolve Resolver) (*QuickConfig, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxConfigFile+1))
	if err != nil {
		return nil, &ConfigError{File: name, Err: err}
	}
	if len(b) > MaxConfigFile {
		return nil, &ConfigError{File: name, Err: fmt.Errorf("file larger than %d bytes", MaxConfigFile)}
	}
	q := &QuickConfig{}
	var wg strings.Builder
	inInterface := false
	lineNo := 0
	for line := range strings.Lines(string(b)) {
		lineNo++
		s := line
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		s = removeSpace(s)
		if strings.HasPrefix(s, "[") {
			inInterface = strings.EqualFold(s, "[Interface]")
		} else if key, value, ok := strings.Cut(s, "="); ok && inInterface && isQuickKey(key) {
			if err := q.key(key, value); err != nil {
				return nil, &ConfigError{File: name, Line: lineNo, Err: err}
			}
			// Keep the line count, so that errors in the wg part point
			// at the line of the file the user wrote.
			wg.WriteString("\n")
			continue
		}
		wg.WriteString(line)
	}
	cfg, names, err := ParseConfigFile(strings.NewReader(wg.String()), name, resolve)
	if err != nil {
		return nil, err
	}
	q.Config, q.Names = cfg, names
	return q, nil
}

// key handles one wg-quick key of [Interface]; value has no spaces.
func (q *QuickConfig) key(key, value string) error {
	switch strings.ToLower(key) {
	case "address":
		for _, v := range splitList(value) {
			p, err := parseAddressPrefix(v)
			if err != nil {
				//lint:ignore ST1005 the prefix is the config key, spelled as in wg0.conf, like its neighbours
				return fmt.Errorf("Address: %w", err)
			}
			q.Addresses = append(q.Addresses, p)
		}
		if len(q.Addresses) > maxQuickEntries {
			//lint:ignore ST1005 the prefix is the config key, spelled as in wg0.conf
			return fmt.Errorf("Address: more than %d entries", maxQuickEntries)
		}
	case "dns":
		for _, v := range splitList(value) {
			if a, err := netip.ParseAddr(v); err == nil {
				if a.Zone() != "" || a.IsUnspecified() {
					return fmt.Errorf("DNS: %q is not a name server address", v)
				}
				q.DNS = append(q.DNS, a.Unmap())
				continue
			}
			if !validSearchDomain(v) {
				return fmt.Errorf("DNS: %q is neither an IP address nor a search domain", shorten(v))
			}
			q.DNSSearch = append(q.DNSSearch, v)
		}
		if len(q.DNS)+len(q.DNSSearch) > maxQuickEntries {
			return fmt.Errorf("DNS: more than %d entries", maxQuickEntries)
		}
	case "mtu":
		mtu, err := strconv.Atoi(value)
		if err != nil || mtu < 68 || mtu > 65535 {
			return fmt.Errorf("MTU: %q is not a number from 68 to 65535", shorten(value))
		}
		q.MTU = mtu
	default:
		for _, k := range q.Ignored {
			if strings.EqualFold(k, key) {
				return nil
			}
		}
		q.Ignored = append(q.Ignored, canonicalQuickKey(key))
	}
	return nil
}

// splitList splits a comma-separated value, skipping empty entries as
// wg-quick does.
func splitList(value string) []string {
	var out []string
	for v := range strings.SplitSeq(value, ",") {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// parseAddressPrefix reads an Address entry: an address with or without a
// prefix length; host bits are kept (they are the address).
func parseAddressPrefix(v string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(v); err == nil {
		if p.Addr().Zone() != "" || p.Addr().IsUnspecified() {
			return netip.Prefix{}, fmt.Errorf("%q is not a usable interface address", v)
		}
		return netip.PrefixFrom(p.Addr().Unmap(), unmapBits(p)), nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil || a.Zone() != "" || a.IsUnspecified() {
		return netip.Prefix{}, fmt.Errorf("%q is not an address like 10.0.0.2/24", shorten(v))
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// unmapBits converts the prefix length of a v4-mapped v6 prefix to IPv4.
func unmapBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return max(0, p.Bits()-96)
	}
	return p.Bits()
}

// validSearchDomain accepts a DNS name made of letters, digits, '-', '_'
// and dots, as resolv.conf's search line can carry it.
func validSearchDomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

func canonicalQuickKey(key string) string {
	for _, k := range []string{"Table", "PreUp", "PostUp", "PreDown", "PostDown", "SaveConfig"} {
		if strings.EqualFold(k, key) {
			return k
		}
	}
	return key
}
