package ipc

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

// Value syntax shared by wg's configuration files and `wg set` arguments,
// following wg(8): keys in base64, fwmark and keepalive may be "off",
// allowed IPs are comma-separated with optional +/- for incremental changes,
// and endpoints may name a host, resolved when the file or command is read.

// Resolver maps a host name to its addresses, like net.Resolver.LookupNetIP
// with network "ip". The first address is used, as wg(8) uses the first
// getaddrinfo result.
type Resolver func(host string) ([]netip.Addr, error)

func parseKeyBase64(v string) ([noise.KeySize]byte, error) {
	k, err := noise.ParseKeyBase64(v)
	if err != nil {
		return k, fmt.Errorf("key %q is not 44 characters of base64: %w", shorten(v), err)
	}
	return k, nil
}

// parseFwMark accepts "off", decimal, or hexadecimal after a lowercase "0x",
// up to 0xffffffff, as wg(8) does.
func parseFwMark(v string) (uint32, error) {
	if strings.EqualFold(v, "off") {
		return 0, nil
	}
	bad := fmt.Errorf("fwmark %q is neither 0/off nor 0-0xffffffff", shorten(v))
	if v == "" || v[0] < '0' || v[0] > '9' {
		return 0, bad
	}
	base, digits := 10, v
	if len(v) > 2 && v[0] == '0' && v[1] == 'x' {
		base, digits = 16, v[2:]
	}
	n, err := strconv.ParseUint(digits, base, 32)
	if err != nil {
		return 0, bad
	}
	return uint32(n), nil
}

// parseKeepalive accepts "off" or 0..65535 seconds.
func parseKeepalive(v string) (uint16, error) {
	if strings.EqualFold(v, "off") {
		return 0, nil
	}
	n, err := parseDecimal([]byte(v), 16)
	if err != nil {
		return 0, fmt.Errorf("persistent keepalive %q is neither 0/off nor 1-65535", shorten(v))
	}
	return uint16(n), nil
}

// parsePort accepts 0..65535 in decimal. (wg also takes service names from
// /etc/services; fips-go does not.)
func parsePort(v string) (uint16, error) {
	n, err := parseDecimal([]byte(v), 16)
	if err != nil {
		return 0, fmt.Errorf("port %q is not a number from 0 to 65535", shorten(v))
	}
	return uint16(n), nil
}

// applyAllowedIPs parses one AllowedIPs value (spaces already removed) into
// pc, as wg(8) does: the value replaces the peer's list, unless an entry
// carries '+' (add) or '-' (remove), which makes the whole value an
// incremental change. An empty value replaces the list with nothing.
func applyAllowedIPs(pc *device.PeerConfig, v string) error {
	pc.ReplaceAllowedIPs = true
	if v == "" {
		return nil
	}
	for entry := range strings.SplitSeq(v, ",") {
		var c device.AllowedIPChange
		switch {
		case strings.HasPrefix(entry, "-"):
			c.Remove = true
			fallthrough
		case strings.HasPrefix(entry, "+"):
			pc.ReplaceAllowedIPs = false
			entry = entry[1:]
		}
		p, err := parseWGPrefix(entry)
		if err != nil {
			return err
		}
		c.Prefix = p
		pc.AllowedIPs = append(pc.AllowedIPs, c)
	}
	return nil
}

// parseWGPrefix parses addr[/bits]; without bits the prefix is the single
// address. Host bits are masked off (wg only warns; the device masks).
func parseWGPrefix(s string) (netip.Prefix, error) {
	addrPart, bitsPart, hasBits := strings.Cut(s, "/")
	a, err := netip.ParseAddr(addrPart)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("allowed IP %q: unable to parse IP address", shorten(s))
	}
	bits := a.BitLen()
	if hasBits {
		n, err := parseDecimal([]byte(bitsPart), 16)
		if err != nil || int(n) > a.BitLen() {
			return netip.Prefix{}, fmt.Errorf("allowed IP %q is not in the correct format", shorten(s))
		}
		bits = int(n)
	}
	return netip.PrefixFrom(a, bits).Masked(), nil
}

// parseWGEndpoint parses host:port or [host]:port and resolves a host name
// with resolve. Like wg(8), an unbracketed value splits at its last colon.
func parseWGEndpoint(v string, resolve Resolver) (netip.AddrPort, error) {
	var host, port string
	if strings.HasPrefix(v, "[") {
		end := strings.IndexByte(v, ']')
		if end < 0 {
			return netip.AddrPort{}, fmt.Errorf("endpoint %q: unable to find matching brace", shorten(v))
		}
		host, port = v[1:end], v[end+1:]
		if !strings.HasPrefix(port, ":") || len(port) == 1 {
			return netip.AddrPort{}, fmt.Errorf("endpoint %q: unable to find port", shorten(v))
		}
		port = port[1:]
	} else {
		i := strings.LastIndexByte(v, ':')
		if i < 0 || i == len(v)-1 {
			return netip.AddrPort{}, fmt.Errorf("endpoint %q: unable to find port", shorten(v))
		}
		host, port = v[:i], v[i+1:]
	}
	p, err := parsePort(port)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("endpoint %q: %w", shorten(v), err)
	}
	addr, err := resolveHost(host, resolve)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("endpoint %q: %w", shorten(v), err)
	}
	return netip.AddrPortFrom(addr, p), nil
}

func resolveHost(host string, resolve Resolver) (netip.Addr, error) {
	if host == "" {
		return netip.Addr{}, errors.New("empty host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a, checkZone(a.Zone())
	}
	if strings.ContainsAny(host, "%[]/, ") {
		return netip.Addr{}, fmt.Errorf("%q is neither an IP address nor a host name", shorten(host))
	}
	if resolve == nil {
		return netip.Addr{}, fmt.Errorf("host name %q given but no resolver", shorten(host))
	}
	addrs, err := resolve(host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("resolving %q: %w", shorten(host), err)
	}
	for _, a := range addrs {
		if a.IsValid() {
			return a.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%q has no IPv4 or IPv6 address", shorten(host))
}

func shorten(s string) string { return truncate([]byte(s)) }
