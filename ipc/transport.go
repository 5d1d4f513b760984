package ipc

import (
	"fmt"
	"strconv"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
)

// fips-go's keys for the stream transport (conn.Stream): datagrams over TCP
// for networks that pass no UDP. wg never sends them, and a get reply
// carries them only when they are set, so a device without them reads and
// writes exactly what wireguard-go does.
//
//	UAPI               config file          fips-go set
//	fips_tcp_listen=   TCPListen =          tcp-listen      [Interface]: off, on (the UDP port) or a TCP port
//	fips_transport=    Transport =          transport       [Peer]: udp, tcp, tls or auto
//	fips_tls_sni=      TLSServerName =      tls-server-name [Peer]: the SNI of a TLS stream ("" none)
//	fips_proxy=        Proxy =              proxy           [Interface]: http://[user:pass@]host[:port] ("" none)
//
// In a config file, a peer whose Endpoint names a host and whose transport
// is tls or auto sends that host as its SNI unless TLSServerName says
// otherwise.
const (
	uapiTCPListen = "fips_tcp_listen"
	uapiTransport = "fips_transport"
	uapiTLSSNI    = "fips_tls_sni"
	uapiProxy     = "fips_proxy"
	// In get replies only: the transport a peer is configured with when
	// not UDP (fips_transport is the one it uses now), and whether its
	// stream goes through the proxy.
	uapiTransportSetting = "fips_transport_setting"
	uapiViaProxy         = "fips_via_proxy"
)

// parseProxy checks an HTTP proxy URL ("" is none).
func parseProxy(v string) (*string, error) {
	if v != "" {
		if _, err := conn.ParseProxy(v); err != nil {
			return nil, err
		}
	}
	return &v, nil
}

// appendProxy appends the proxy line of a get reply, when one is set.
func appendProxy(b []byte, p string) []byte {
	if p == "" {
		return b
	}
	b = append(b, uapiProxy+"="...)
	b = append(b, p...)
	return append(b, '\n')
}

// parseStreamListen reads "off", "on" (the UDP listen port) or a port.
func parseStreamListen(v string) (device.StreamListen, error) {
	switch v {
	case "off":
		return device.StreamListen{}, nil
	case "on":
		return device.StreamListen{On: true}, nil
	}
	n, err := parseDecimal([]byte(v), 16)
	if err != nil || n == 0 {
		return device.StreamListen{}, fmt.Errorf("%q is not off, on or a TCP port", shorten(v))
	}
	return device.StreamListen{On: true, Port: uint16(n)}, nil
}

// formatStreamListen is parseStreamListen's inverse.
func formatStreamListen(sl device.StreamListen) string {
	switch {
	case !sl.On:
		return "off"
	case sl.Port == 0:
		return "on"
	}
	return strconv.Itoa(int(sl.Port))
}

func parseTransport(v string) (*conn.Transport, error) {
	t, err := conn.ParseTransport(v)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// appendStreamListen appends the listener line of a get reply, when on.
func appendStreamListen(b []byte, sl device.StreamListen) []byte {
	if !sl.On {
		return b
	}
	b = append(b, uapiTCPListen+"="...)
	b = append(b, formatStreamListen(sl)...)
	return append(b, '\n')
}

// appendServerName appends a peer's SNI line, when it has one.
func appendServerName(b []byte, name string) []byte {
	if name == "" {
		return b
	}
	b = append(b, uapiTLSSNI+"="...)
	b = append(b, name...)
	return append(b, '\n')
}

// appendTransport appends a peer's transport lines, none for a peer on
// UDP that is configured so.
func appendTransport(b []byte, ps *device.PeerStatus) []byte {
	if ps.Transport == conn.TransportUDP && ps.TransportSetting == conn.TransportUDP {
		return b
	}
	b = append(b, uapiTransport+"="...)
	b = append(b, ps.Transport.String()...)
	b = append(b, '\n')
	if ps.TransportSetting != conn.TransportUDP {
		b = append(b, uapiTransportSetting+"="...)
		b = append(b, ps.TransportSetting.String()...)
		b = append(b, '\n')
	}
	if ps.ViaProxy {
		b = append(b, uapiViaProxy+"=true\n"...)
	}
	return b
}
