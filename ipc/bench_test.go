package ipc_test

import (
	"bytes"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/ipc"
)

const benchPeers = 10000

func peerKey(i int) [32]byte {
	var k [32]byte
	k[0], k[1], k[2] = byte(i), byte(i>>8), 0x42
	return k
}

// setRequest10k is what `wg setconf` sends for 10,000 peers with an
// endpoint and two allowed IPs each.
func setRequest10k(tb testing.TB) []byte {
	cfg := &device.Config{ReplacePeers: true}
	for i := 0; i < benchPeers; i++ {
		ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)}), 51820)
		cfg.Peers = append(cfg.Peers, device.PeerConfig{
			PublicKey:         peerKey(i),
			Endpoint:          &ep,
			ReplaceAllowedIPs: true,
			AllowedIPs: []device.AllowedIPChange{
				{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)},
				{Prefix: netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0, 0, 0, byte(i >> 8), byte(i)}), 64)},
			},
		})
	}
	var buf bytes.Buffer
	if err := ipc.WriteSet(&buf, cfg); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func BenchmarkParseSet10kPeers(b *testing.B) {
	req := setRequest10k(b)
	b.SetBytes(int64(len(req)))
	b.ReportAllocs()
	for b.Loop() {
		cfg, err := ipc.ParseSet(bytes.NewReader(req), 0)
		if err != nil || len(cfg.Peers) != benchPeers {
			b.Fatal(err)
		}
	}
}

func status10k() device.Status {
	st := sampleStatus()
	st.Peers = nil
	for i := 0; i < benchPeers; i++ {
		st.Peers = append(st.Peers, device.PeerStatus{
			PublicKey:     peerKey(i),
			Endpoint:      netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)}), 51820),
			LastHandshake: time.Unix(1700000000+int64(i), 0),
			TxBytes:       uint64(i) << 20,
			RxBytes:       uint64(i) << 10,
			AllowedIPs: []netip.Prefix{
				netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24),
				netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0, 0, 0, byte(i >> 8), byte(i)}), 64),
			},
		})
	}
	return st
}

func BenchmarkWriteGet10kPeers(b *testing.B) {
	st := status10k()
	var n countWriter
	ipc.WriteGet(&n, st)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		if err := ipc.WriteGet(io.Discard, st); err != nil {
			b.Fatal(err)
		}
	}
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// TestParseSet10kSize documents the request size behind DefaultMaxRequest.
func TestParseSet10kSize(t *testing.T) {
	req := setRequest10k(t)
	if len(req) > ipc.DefaultMaxRequest/4 {
		t.Fatalf("10k-peer request is %d bytes, too close to DefaultMaxRequest", len(req))
	}
	t.Logf("10,000 peers x 2 allowed IPs: %d bytes", len(req))
}
