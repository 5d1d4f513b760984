package ipc

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

// ParseSetArgs parses the arguments of `wg set IFACE ...` (without IFACE):
//
//	[listen-port P] [fwmark M|off] [private-key FILE]
//	[jc N] [jmin N] [jmax N] [s1 N] .. [s4 N] [h1 N[-M]] .. [h4 N[-M]] [i1 TAGS] .. [i5 TAGS]
//	[tcp-listen off|on|PORT] [proxy http://[user:pass@]host[:port]|""]
//	[tls-certificate FILE tls-key FILE]
//	[peer KEY [remove] [preshared-key FILE] [endpoint HOST:PORT] [transport udp|tcp|tls|auto]
//	          [tls-server-name NAME] [path-probes true|false]
//	          [persistent-keepalive N|off] [allowed-ips A/B[,C/D]...]]...
//
// Keys given as FILE are read with readFile; an empty file removes the key.
// allowed-ips replaces the peer's list (an empty value clears it), unless an
// entry starts with '+' or '-', which adds or removes just that prefix.
// Host names in endpoint are resolved with resolve.
func ParseSetArgs(args []string, resolve Resolver, readFile func(string) ([]byte, error)) (*device.Config, error) {
	var cfg device.Config
	var pc *device.PeerConfig
	for len(args) > 0 {
		arg := args[0]
		if arg == "remove" && pc != nil {
			pc.Remove = true
			args = args[1:]
			continue
		}
		if len(args) < 2 || !setArgAllowed(arg, pc != nil) {
			return nil, fmt.Errorf("wg set: invalid argument %q", shorten(arg))
		}
		v := args[1]
		args = args[2:]
		if arg == "peer" {
			k, err := parseKeyBase64(v)
			if err != nil {
				return nil, fmt.Errorf("wg set: peer: %w", err)
			}
			cfg.Peers = append(cfg.Peers, device.PeerConfig{PublicKey: k})
			pc = &cfg.Peers[len(cfg.Peers)-1]
			continue
		}
		var err error
		if pc == nil {
			err = setDeviceArg(&cfg, arg, v, readFile)
		} else {
			err = setPeerArg(pc, arg, v, resolve, readFile)
		}
		if err != nil {
			return nil, fmt.Errorf("wg set: %s: %w", arg, err)
		}
	}
	for i := range cfg.Peers {
		if cfg.Peers[i].Remove {
			cfg.Peers[i] = device.PeerConfig{PublicKey: cfg.Peers[i].PublicKey, Remove: true}
		}
	}
	return &cfg, nil
}

// setArgAllowed reports whether arg takes a value where it appears: device
// arguments only before the first peer, peer arguments only after one.
func setArgAllowed(arg string, inPeer bool) bool {
	switch arg {
	case "peer":
		return true
	case "listen-port", "fwmark", "private-key":
		return !inPeer
	case "jc", "jmin", "jmax", "s1", "s2", "s3", "s4", "h1", "h2", "h3", "h4", "i1", "i2", "i3", "i4", "i5", "header-protection-key", "tcp-listen", "proxy", "tls-certificate", "tls-key":
		return !inPeer
	case "preshared-key", "endpoint", "persistent-keepalive", "allowed-ips", "transport", "path-probes", "tls-server-name":
		return inPeer
	}
	return false
}

func setDeviceArg(cfg *device.Config, arg, v string, readFile func(string) ([]byte, error)) error {
	switch arg {
	case "listen-port":
		p, err := parsePort(v)
		if err != nil {
			return err
		}
		cfg.ListenPort = &p
	case "fwmark":
		m, err := parseFwMark(v)
		if err != nil {
			return err
		}
		cfg.FwMark = &m
	case "private-key":
		k, err := readKeyFile(v, readFile)
		if err != nil {
			return err
		}
		pk := noise.PrivateKey(k)
		cfg.PrivateKey = &pk
	case "tcp-listen":
		sl, err := parseStreamListen(v)
		if err != nil {
			return err
		}
		cfg.StreamListen = &sl
	case "proxy":
		px, err := parseProxy(v)
		if err != nil {
			return err
		}
		cfg.Proxy = px
	case "tls-certificate", "tls-key":
		if readFile == nil {
			return errors.New("certificate files given but no way to read them")
		}
		pem, err := readFile(v)
		if err != nil {
			return err
		}
		return setTLSPart(cfg, arg == "tls-key", pem)
	case "header-protection-key":
		k, err := readKeyFile(v, readFile)
		if err != nil {
			return err
		}
		return setObfsKey(cfg, "header_protection_key", hex.EncodeToString(k[:]))
	default:
		return setObfsKey(cfg, arg, v)
	}
	return nil
}

func setPeerArg(pc *device.PeerConfig, arg, v string, resolve Resolver, readFile func(string) ([]byte, error)) error {
	switch arg {
	case "preshared-key":
		k, err := readKeyFile(v, readFile)
		if err != nil {
			return err
		}
		psk := noise.PresharedKey(k)
		pc.PresharedKey = &psk
	case "endpoint":
		ap, err := parseWGEndpoint(v, resolve)
		if err != nil {
			return err
		}
		pc.Endpoint = &ap
	case "persistent-keepalive":
		ka, err := parseKeepalive(v)
		if err != nil {
			return err
		}
		pc.PersistentKeepalive = &ka
	case "transport":
		t, err := parseTransport(v)
		if err != nil {
			return err
		}
		pc.Transport = t
	case "path-probes":
		pp, err := parsePathProbes(v)
		if err != nil {
			return err
		}
		pc.PathProbes = pp
	case "tls-server-name":
		pc.TLSServerName = &v
	case "allowed-ips":
		// Like wg, a second allowed-ips for the same peer adds to the first.
		return applyAllowedIPs(pc, removeSpace(v))
	}
	return nil
}

// readKeyFile reads a base64 key from a file, as wg(8) does: an empty file
// means "no key" (all zeros), otherwise 44 characters of base64 followed by
// nothing but white space.
func readKeyFile(path string, readFile func(string) ([]byte, error)) ([noise.KeySize]byte, error) {
	if readFile == nil {
		return [noise.KeySize]byte{}, errors.New("key files given but no way to read them")
	}
	data, err := readFile(path)
	if err != nil {
		return [noise.KeySize]byte{}, err
	}
	if len(data) == 0 {
		return [noise.KeySize]byte{}, nil
	}
	const n = 44
	if len(data) < n {
		return [noise.KeySize]byte{}, fmt.Errorf("%s: key file too short", path)
	}
	if strings.TrimLeft(string(data[n:]), " \t\n\v\f\r") != "" {
		return [noise.KeySize]byte{}, fmt.Errorf("%s: trailing characters after the key", path)
	}
	k, err := parseKeyBase64(string(data[:n]))
	if err != nil {
		return k, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}
