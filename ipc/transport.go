package ipc

import (
	"encoding/base64"
	"fmt"
	"io"
	"os"
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
//	fips_tls_cert=     TLSCertificate =     tls-certificate [Interface]: the listener's certificate chain (PEM)
//	fips_tls_key=      TLSKey =             tls-key         [Interface]: its private key (PEM)
//
// In UAPI the two TLS values are the PEM files' bytes in standard base64,
// split over as many lines of the same key as MaxLine needs (each line's
// bytes follow the previous one's); in a config file and to fips-go set
// they are file names, read by the client. Both go together; both empty go back to a
// self-signed certificate. A get reply carries the certificate, never the
// key.
//
// In a config file, a peer whose Endpoint names a host and whose transport
// is tls or auto sends that host as its SNI unless TLSServerName says
// otherwise.
const (
	uapiTCPListen = "fips_tcp_listen"
	uapiTransport = "fips_transport"
	uapiTLSSNI    = "fips_tls_sni"
	uapiProxy     = "fips_proxy"
	uapiTLSCert   = "fips_tls_cert"
	uapiTLSKey    = "fips_tls_key"
	// In get replies only: the transport a peer is configured with when
	// not UDP (fips_transport is the one it uses now), and whether its
	// stream goes through the proxy.
	uapiTransportSetting = "fips_transport_setting"
	uapiViaProxy         = "fips_via_proxy"
)

// maxPEMFile bounds a certificate or key file.
const maxPEMFile = 64 << 10

// pemChunk is how many PEM bytes one UAPI line carries: base64 makes
// 3840 characters of them, which with the key fits MaxLine.
const pemChunk = 2880

// setTLSPart appends PEM bytes to the certificate or the key of cfg's TLS
// certificate.
func setTLSPart(cfg *device.Config, key bool, pem []byte) error {
	if cfg.TLSCertificate == nil {
		cfg.TLSCertificate = &device.TLSCertificate{}
	}
	dst := &cfg.TLSCertificate.CertPEM
	if key {
		dst = &cfg.TLSCertificate.KeyPEM
	}
	if len(*dst)+len(pem) > maxPEMFile {
		return fmt.Errorf("PEM over %d bytes", maxPEMFile)
	}
	*dst = append(*dst, pem...)
	return nil
}

// setTLSBase64 is setTLSPart for a UAPI value.
func setTLSBase64(cfg *device.Config, key bool, v []byte) error {
	pem, err := base64.StdEncoding.DecodeString(string(v))
	if err != nil {
		return fmt.Errorf("not base64: %w", err)
	}
	return setTLSPart(cfg, key, pem)
}

// readPEMFile reads a certificate or key file of at most maxPEMFile
// bytes (a regular file: not a device that never ends).
func readPEMFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	if err == nil && len(b) > maxPEMFile {
		err = fmt.Errorf("%s is over %d bytes", name, maxPEMFile)
	}
	return b, err
}

// appendTLSCert appends the certificate lines of a get reply or a set
// request (with the key's when key is set).
func appendTLSCert(b []byte, c *device.TLSCertificate, key bool) []byte {
	if c == nil {
		return b
	}
	b = appendPEMLines(b, uapiTLSCert, c.CertPEM)
	if key {
		b = appendPEMLines(b, uapiTLSKey, c.KeyPEM)
	}
	return b
}

// appendPEMLines appends pem as k= lines of at most pemChunk bytes each
// (one empty line for none).
func appendPEMLines(b []byte, k string, pem []byte) []byte {
	for first := true; first || len(pem) > 0; first = false {
		n := min(len(pem), pemChunk)
		b = append(b, k+"="...)
		b = base64.StdEncoding.AppendEncode(b, pem[:n])
		b = append(b, '\n')
		pem = pem[n:]
	}
	return b
}

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
