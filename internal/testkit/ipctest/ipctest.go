// Package ipctest is a conformance suite for UAPI handlers: malformed or
// invalid set requests that must be refused with the right errno and must
// leave the device exactly as it was.
package ipctest

import (
	"fmt"
	"strings"

	"github.com/fips-go/fips-go/ipc"
)

// BadRequest is one request that a correct parser and validator refuse.
type BadRequest struct {
	Name string
	// Request is every byte sent, from the "set=1" line on.
	Request string
	// HalfClose shuts the write side after Request, for requests that end
	// without their empty line.
	HalfClose bool
	// Errno is the negative errno the reply must carry.
	Errno int64
}

// MaxRequest is the ServeOptions.MaxRequest RunBadRequests serves with, so
// that the oversized request need not be megabytes long.
const MaxRequest = 64 << 10

// Keys used by the requests, in UAPI hex. SeedKey and the peers are what
// RunBadRequests configures before it starts.
const (
	SeedKey  = "e84b5a6d2717c1003a13b431570353dbaca9146cf150c5f8575680feba52027a"
	PeerKey1 = "b85996fecc9c7f1fc6d2572a76eda11d59bcd20be8e543b15ce4bd85a8e75a33"
	PeerKey2 = "58402e695ba1772b1cc9309755f043251ea77fdcf10fbe63989ceb7e19321376"
	otherKey = "662e14fd594556f522604703340351258903b64f35553763f19426ab2a515c58"
)

// Seed is the configuration RunBadRequests applies first, so that a bad
// request has something to damage.
const Seed = "set=1\n" +
	"private_key=" + SeedKey + "\n" +
	"replace_peers=true\n" +
	"public_key=" + PeerKey1 + "\n" +
	"preshared_key=" + otherKey + "\n" +
	"endpoint=127.0.0.1:51001\n" +
	"replace_allowed_ips=true\n" +
	"allowed_ip=10.1.0.0/16\n" +
	"public_key=" + PeerKey2 + "\n" +
	"endpoint=[::1]:51002\n" +
	"allowed_ip=fd00::/64\n" +
	"\n"

var (
	einval   = ipc.ErrnoInvalid
	eproto   = ipc.ErrnoProtocol
	emsgsize = ipc.ErrnoTooBig
)

func set(lines ...string) string {
	return "set=1\n" + strings.Join(lines, "\n") + "\n\n"
}

func peer(lines ...string) string {
	return set(append([]string{"public_key=" + PeerKey1}, lines...)...)
}

// BadRequests are the requests RunBadRequests sends. Each is refused by the
// parser or the request-level validation alone, whatever the device state;
// requests only a device can judge (a port in use, update_only on a missing
// peer, which wireguard-go accepts) are not here.
var BadRequests = []BadRequest{
	bad("no equals sign", set("listen_port"), eproto),
	bad("unknown device key", set("listen_prot=1"), einval),
	bad("unknown peer key", peer("endpont=1.2.3.4:5"), einval),
	bad("empty key", set("=1"), einval),
	bad("space before equals", set("listen_port =1"), einval),
	bad("space after equals", set("listen_port= 1"), einval),
	bad("carriage return inside a value", set("listen_port=1\r2"), einval),
	bad("NUL in value", set("listen_port=1\x00"), einval),
	bad("private_key short", set("private_key="+SeedKey[:62]), einval),
	bad("private_key long", set("private_key="+SeedKey+"00"), einval),
	bad("private_key not hex", set("private_key="+strings.Repeat("g", 64)), einval),
	bad("private_key base64", set("private_key=yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk="), einval),
	bad("listen_port too big", set("listen_port=65536"), einval),
	bad("listen_port negative", set("listen_port=-1"), einval),
	bad("listen_port empty", set("listen_port="), einval),
	bad("listen_port plus sign", set("listen_port=+1"), einval),
	bad("fwmark too big", set("fwmark=4294967296"), einval),
	bad("fwmark hex", set("fwmark=0x10"), einval),
	bad("replace_peers false", set("replace_peers=false"), einval),
	bad("replace_peers 1", set("replace_peers=1"), einval),
	bad("public_key short", set("public_key=abcd"), einval),
	bad("public_key empty", set("public_key="), einval),
	bad("preshared_key before public_key", set("preshared_key="+otherKey), einval),
	bad("endpoint before public_key", set("endpoint=1.2.3.4:5"), einval),
	bad("allowed_ip before public_key", set("allowed_ip=10.0.0.0/8"), einval),
	bad("remove before public_key", set("remove=true"), einval),
	bad("listen_port in peer section", peer("listen_port=1"), einval),
	bad("private_key in peer section", peer("private_key="+SeedKey), einval),
	bad("replace_peers in peer section", peer("replace_peers=true"), einval),
	bad("preshared_key bad hex", peer("preshared_key="+strings.Repeat("x", 64)), einval),
	bad("endpoint hostname", peer("endpoint=example.com:51820"), einval),
	bad("endpoint IPv6 without brackets", peer("endpoint=::1:51820"), einval),
	bad("endpoint without port", peer("endpoint=1.2.3.4"), einval),
	bad("endpoint port too big", peer("endpoint=1.2.3.4:65536"), einval),
	bad("endpoint IPv4 in brackets", peer("endpoint=[1.2.3.4]:1"), einval),
	bad("endpoint empty", peer("endpoint="), einval),
	bad("endpoint zone with bracket", peer("endpoint=[fe80::1%a]b]:1"), einval),
	bad("keepalive too big", peer("persistent_keepalive_interval=65536"), einval),
	bad("keepalive negative", peer("persistent_keepalive_interval=-1"), einval),
	bad("keepalive off", peer("persistent_keepalive_interval=off"), einval),
	bad("allowed_ip without bits", peer("allowed_ip=10.0.0.1"), einval),
	bad("allowed_ip IPv4 /33", peer("allowed_ip=10.0.0.0/33"), einval),
	bad("allowed_ip IPv6 /129", peer("allowed_ip=fd00::/129"), einval),
	bad("allowed_ip double minus", peer("allowed_ip=--10.0.0.0/8"), einval),
	bad("allowed_ip plus", peer("allowed_ip=+10.0.0.0/8"), einval),
	bad("allowed_ip with zone", peer("allowed_ip=fe80::%eth0/64"), einval),
	bad("allowed_ip list", peer("allowed_ip=10.0.0.0/8,10.1.0.0/16"), einval),
	bad("allowed_ip leading zero octet", peer("allowed_ip=010.0.0.0/8"), einval),
	bad("protocol_version 2", peer("protocol_version=2"), einval),
	bad("protocol_version 0", peer("protocol_version=0"), einval),
	bad("remove false", peer("remove=false"), einval),
	bad("update_only yes", peer("update_only=yes"), einval),
	bad("replace_allowed_ips false", peer("replace_allowed_ips=false"), einval),
	bad("valid device lines then a bad one", set("private_key="+otherKey, "fwmark=7", "listen_port=99999"), einval),
	bad("replace_peers then a bad peer", set("replace_peers=true", "public_key="+otherKey, "allowed_ip=10.9.0.0/16",
		"public_key="+PeerKey2, "endpoint=nonsense"), einval),
	bad("remove then a bad line", set("public_key="+PeerKey1, "remove=true", "public_key="+PeerKey2, "allowed_ip=bad"), einval),
	bad("bad line after a removed peer", set("public_key="+PeerKey1, "remove=true", "allowed_ip=bad"), einval),
	bad("line too long", set("public_key="+PeerKey1, "endpoint="+strings.Repeat("1", ipc.MaxLine)), eproto),
	bad("jc not a number", set("jc=four"), einval),
	bad("jc hex", set("jc=0x4"), einval),
	bad("h1 too big", set("h1=4294967296"), einval),
	bad("h1 negative", set("h1=-5"), einval),
	bad("s1 empty", set("s1="), einval),
	bad("jc in peer section", peer("jc=4"), einval),
	bad("obfuscation then a bad line", set("jc=9", "h1=77", "listen_port=99999"), einval),
	badEOF("no empty line before EOF", "set=1\nlisten_port=1\n", eproto),
	badEOF("EOF mid-line", "set=1\nlisten_port=1", eproto),
	bad("request over the size limit", set("public_key="+PeerKey1, manyAllowedIPs(MaxRequest/20)), emsgsize),
}

// SeedObfuscation sets AmneziaWG obfuscation, for handlers that know it:
// DeviceBadRequests run after it, so that they have it to damage.
const SeedObfuscation = "set=1\njc=4\njmin=40\njmax=70\ns1=52\ns2=37\n" +
	"h1=1234567891\nh2=1234567892\nh3=1234567893\nh4=1234567894\n\n"

// DeviceBadRequests are refused by the device's validation of the whole
// request (device.Config), not by the parser: run them against a device.
// A request changes only the obfuscation keys it names, so several are
// invalid only together with the seeded values they meet.
var DeviceBadRequests = []BadRequest{
	bad("jmin above jmax", set("jc=4", "jmin=70", "jmax=40"), einval),
	bad("jmax above 1280", set("jc=4", "jmin=40", "jmax=1281"), einval),
	bad("jc negative", set("jc=-1"), einval),
	bad("jc above 128", set("jc=129"), einval),
	bad("s1 too large", set("s1=1133"), einval),
	bad("s2 too large", set("s2=1189"), einval),
	bad("padded handshakes of one size", set("s1=10", "s2=66"), einval),
	bad("h values equal", set("h1=100", "h2=100"), einval),
	bad("h1 equal to the h4 the device has", set("h1=1234567894"), einval),
	bad("h1 a standard type h2 keeps", set("h2=0", "h1=2"), einval),
	bad("h4 equal to the standard type h1 keeps", set("h1=0", "h4=1"), einval),
	bad("s3 too large", set("s3=1217"), einval),
	bad("s4 too large", set("s4=257"), einval),
	bad("h ranges overlap", set("h1=100-200", "h2=150"), einval),
	bad("h range covering a standard type", set("h3=0", "h4=1-10"), einval),
	bad("s2 making the response as long as the initiation the device pads", set("s2=108"), einval),
	bad("i1 unknown tag", set("i1=<x 5>"), einval),
	bad("i2 text outside tags", set("i2=hello"), einval),
	bad("valid keys, then an invalid combination", set("private_key="+otherKey, "listen_port=4242", "jc=4", "jmin=9", "jmax=8"), einval),
}

func bad(name, req string, errno int64) BadRequest {
	return BadRequest{Name: name, Request: req, Errno: errno}
}

// badEOF is a request whose sender shuts its side of the connection, so the
// request ends without its empty line.
func badEOF(name, req string, errno int64) BadRequest {
	return BadRequest{Name: name, Request: req, HalfClose: true, Errno: errno}
}

func manyAllowedIPs(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "allowed_ip=10.%d.%d.0/24\n", (i>>8)&255, i&255)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
