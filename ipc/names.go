package ipc

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"

	"github.com/fips-go/fips-go/device/noise"
)

// fips-go's extension for endpoints given as host names (wg never sends
// it; wireguard-go answers it with an error):
//
//	set=fipsnames            get=fipsnames
//	replace=true   (opt.)    (empty line)
//	public_key=HEX
//	endpoint_name=HOST:PORT  (empty: forget the name)
//	...
//	(empty line)
//
// get=fipsnames answers with public_key and endpoint_name pairs, then
// errno=0. The daemon follows each name when handshakes to the peer fail.

// NamesHandler is a Handler that also keeps endpoint names.
type NamesHandler interface {
	Handler
	// SetEndpointNames records names (an empty name forgets the peer's);
	// with replace, names not given are forgotten. All or nothing.
	SetEndpointNames(names map[noise.PublicKey]string, replace bool) error
	// EndpointNames returns a copy of the names kept.
	EndpointNames() map[noise.PublicKey]string
}

// maxEndpointName bounds "host:port": a DNS name is at most 253 bytes.
const maxEndpointName = 253 + 6

// ValidEndpointName reports whether s is HOST:PORT with a DNS-style host
// name (not an address literal) and a port.
func ValidEndpointName(s string) error {
	if len(s) > maxEndpointName {
		return fmt.Errorf("endpoint name longer than %d bytes", maxEndpointName)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("endpoint name %q: want host:port", truncate([]byte(s)))
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("endpoint name %q: bad port", truncate([]byte(s)))
	}
	if host == "" || net.ParseIP(host) != nil {
		return fmt.Errorf("endpoint name %q: not a host name", truncate([]byte(s)))
	}
	for _, c := range []byte(host) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("endpoint name %q: bad character %q", truncate([]byte(s)), c)
		}
	}
	return nil
}

// parseNames reads a set=fipsnames body up to its empty line. inSync
// reports whether the stream is still at a request boundary.
func parseNames(br *bufio.Reader, limit int) (names map[noise.PublicKey]string, replace, inSync bool, err error) {
	lr := newLineReader(br, int64(limit))
	names = map[noise.PublicKey]string{}
	var key *noise.PublicKey
	for {
		line, rerr := lr.next()
		if rerr != nil {
			if errors.Is(rerr, errLineTooLong) {
				err = errors.Join(err, errors.New("line too long"))
				continue
			}
			return nil, false, false, wrapError(ErrnoInvalid, rerr, "set=fipsnames")
		}
		if len(line) == 0 {
			break
		}
		if err != nil {
			continue // read to the end, answer with the first error
		}
		k, v, ok := bytes.Cut(line, []byte{'='})
		switch {
		case !ok:
			err = fmt.Errorf("line %q is not key=value", truncate(line))
		case string(k) == "replace" && key == nil:
			if err = parseTrue(v); err == nil {
				replace = true
			}
		case string(k) == "public_key":
			var b [noise.KeySize]byte
			if b, err = parseHexKey(v); err == nil {
				pk := noise.PublicKey(b)
				key = &pk
			}
		case string(k) == "endpoint_name" && key != nil:
			name := string(v)
			if name != "" {
				err = ValidEndpointName(name)
			}
			names[*key] = name
			key = nil
		default:
			err = fmt.Errorf("unexpected key %q", truncate(k))
		}
	}
	if err != nil {
		return nil, false, true, wrapError(ErrnoInvalid, err, "set=fipsnames")
	}
	return names, replace, true, nil
}

// writeNames writes the pairs, sorted by key so the output is stable.
func writeNames(w io.Writer, names map[noise.PublicKey]string) {
	keys := make([]noise.PublicKey, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return string(keys[i][:]) < string(keys[j][:]) })
	for _, k := range keys {
		fmt.Fprintf(w, "public_key=%s\nendpoint_name=%s\n", hex.EncodeToString(k[:]), names[k])
	}
}

// SetEndpointNames sends set=fipsnames. Against a daemon that does not
// know the request (wireguard-go, older fips-go) the error's errno is
// ErrnoInvalid.
func (c *Client) SetEndpointNames(names map[noise.PublicKey]string, replace bool) error {
	var req bytes.Buffer
	req.WriteString("set=fipsnames\n")
	if replace {
		req.WriteString("replace=true\n")
	}
	writeNames(&req, names)
	req.WriteString("\n")
	return c.roundTrip(req.Bytes(), func(k, v []byte) error { return nil })
}

// EndpointNames asks for the names the daemon follows (get=fipsnames).
func (c *Client) EndpointNames() (map[noise.PublicKey]string, error) {
	names := map[noise.PublicKey]string{}
	var key *noise.PublicKey
	err := c.roundTrip([]byte("get=fipsnames\n\n"), func(k, v []byte) error {
		switch string(k) {
		case "public_key":
			b, err := parseHexKey(v)
			if err != nil {
				return err
			}
			pk := noise.PublicKey(b)
			key = &pk
		case "endpoint_name":
			if key == nil {
				return errors.New("endpoint_name before public_key")
			}
			names[*key] = string(v)
			key = nil
		}
		return nil
	})
	return names, err
}
