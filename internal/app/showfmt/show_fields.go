package showfmt

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/fips-go/fips-go/device"
)

// ShowFields are the single-field forms of `wg show IFACE FIELD`, in the
// order wg(8)'s usage lists them.
var ShowFields = []string{"public-key", "private-key", "listen-port", "fwmark", "peers",
	"preshared-keys", "endpoints", "allowed-ips", "latest-handshakes", "transfer",
	"persistent-keepalive", "dump"}

// ErrUnknownField is returned by FormatField for a field wg does not know.
var ErrUnknownField = errors.New("showfmt: unknown show field")

// FormatField writes one field of st as `wg show IFACE FIELD` does, byte for
// byte: tab-separated, peers in the order the status holds them (wg sorts
// only its pretty form), keys unmasked (wg masks only the pretty form),
// "(none)" and "off" for absent values. With a non-empty iface every line
// starts with it and a tab, as in `wg show all FIELD`.
func FormatField(w io.Writer, iface string, st device.Status, field string) error {
	if field == "dump" {
		return FormatDump(w, iface, st)
	}
	bw := bufio.NewWriter(w)
	prefix := ""
	if iface != "" {
		prefix = iface + "\t"
	}
	if line, ok := interfaceField(st, field); ok {
		bw.WriteString(prefix + line + "\n")
		return bw.Flush()
	}
	value, ok := peerFields[field]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownField, field)
	}
	for i := range st.Peers {
		ps := &st.Peers[i]
		bw.WriteString(prefix)
		if field != "peers" {
			bw.WriteString(ps.PublicKey.String() + "\t")
		}
		bw.WriteString(value(ps) + "\n")
	}
	return bw.Flush()
}

// interfaceField is one of the interface's own fields, or false.
func interfaceField(st device.Status, field string) (string, bool) {
	switch field {
	case "public-key":
		if st.PrivateKey.IsZero() {
			return "(none)", true
		}
		return publicKeyOf(st).String(), true
	case "private-key":
		if st.PrivateKey.IsZero() {
			return "(none)", true
		}
		return st.PrivateKey.Base64(), true
	case "listen-port":
		return strconv.FormatUint(uint64(st.ListenPort), 10), true
	case "fwmark":
		return offOr(uint64(st.FwMark), true), true
	}
	return "", false
}

// peerFields give the value that follows the peer's key (for "peers", the
// key itself).
var peerFields = map[string]func(*device.PeerStatus) string{
	"peers": func(ps *device.PeerStatus) string { return ps.PublicKey.String() },
	"preshared-keys": func(ps *device.PeerStatus) string {
		if ps.PresharedKey.IsZero() {
			return "(none)"
		}
		return ps.PresharedKey.Base64()
	},
	"endpoints": func(ps *device.PeerStatus) string {
		if !ps.Endpoint.IsValid() {
			return "(none)"
		}
		return ps.Endpoint.String()
	},
	"allowed-ips":       func(ps *device.PeerStatus) string { return joinPrefixes(ps, " ", "(none)") },
	"latest-handshakes": func(ps *device.PeerStatus) string { return strconv.FormatInt(handshakeUnix(ps), 10) },
	"transfer": func(ps *device.PeerStatus) string {
		return strconv.FormatUint(ps.RxBytes, 10) + "\t" + strconv.FormatUint(ps.TxBytes, 10)
	},
	"persistent-keepalive": func(ps *device.PeerStatus) string { return offOr(uint64(ps.PersistentKeepalive), false) },
}

// handshakeUnix is the handshake time in whole seconds, 0 for none.
func handshakeUnix(ps *device.PeerStatus) int64 {
	if ps.LastHandshake.IsZero() {
		return 0
	}
	return ps.LastHandshake.Unix()
}
