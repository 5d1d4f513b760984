package ipc

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

func TestPathProbesUAPI(t *testing.T) {
	pub := strings.Repeat("02", 32)
	for _, v := range []bool{true, false} {
		cfg, err := ParseSet(strings.NewReader("public_key="+pub+"\nfips_path_probes="+map[bool]string{true: "true", false: "false"}[v]+"\n\n"), 0)
		if err != nil {
			t.Fatal(err)
		}
		if pp := cfg.Peers[0].PathProbes; pp == nil || *pp != v {
			t.Fatalf("path probes %v, want %v", pp, v)
		}
		var b bytes.Buffer
		if err := WriteSet(&b, cfg); err != nil {
			t.Fatal(err)
		}
		back, err := ParseSet(&b, 0)
		if err != nil || !reflect.DeepEqual(back, cfg) {
			t.Fatalf("WriteSet round trip: %v\n%+v\n%+v", err, back, cfg)
		}
	}
	for _, bad := range []string{"fips_path_probes=yes", "fips_path_probes=", "fips_path_probes=1", "fips_path_probes=TRUE"} {
		_, err := ParseSet(strings.NewReader("public_key="+pub+"\n"+bad+"\n\n"), 0)
		if err == nil || !strings.Contains(err.Error(), "fips_path_probes") {
			t.Errorf("%q: error %v, want one naming the key", bad, err)
		}
	}
	if _, err := ParseSet(strings.NewReader("fips_path_probes=true\n\n"), 0); err == nil {
		t.Error("a device-level fips_path_probes accepted")
	}
}

func TestPathProbesGet(t *testing.T) {
	on := true
	key := noise.PublicKey{2}
	peers := []device.PeerStatus{{PublicKey: key, ProtocolVersion: 1, PathProbes: &on, PathProbesOn: true},
		{PublicKey: noise.PublicKey{3}, ProtocolVersion: 1, PathProbesOn: true},
		{PublicKey: noise.PublicKey{4}, ProtocolVersion: 1}}
	var plain bytes.Buffer
	WriteGet(&plain, device.Status{ListenPort: 1, Peers: peers[1:]})
	if strings.Contains(plain.String(), "fips_") {
		t.Fatalf("peers that set nothing have fips keys:\n%s", plain.String())
	}
	var out bytes.Buffer
	WriteGet(&out, device.Status{ListenPort: 1, Peers: peers})
	writeErrno(&out, 0)
	if n := strings.Count(out.String(), "fips_path_probes=true\n"); n != 1 {
		t.Fatalf("%d fips_path_probes lines in\n%s", n, out.String())
	}
	var g getParser
	if err := readReply(newLineReader(&out, MaxReply), g.kv); err != nil {
		t.Fatal(err)
	}
	got := g.finish()
	if pp := got.Peers[0].PathProbes; pp == nil || !*pp || got.Peers[1].PathProbes != nil {
		t.Fatalf("parsed back %v %v", got.Peers[0].PathProbes, got.Peers[1].PathProbes)
	}
	// get=fips says which peers are probed, configured or by default.
	var fips bytes.Buffer
	if err := writePeerPaths(&fips, peers); err != nil {
		t.Fatal(err)
	}
	writeErrno(&fips, 0)
	p := counterParser{peers: map[noise.PublicKey]*device.PeerStatus{}}
	back := make([]device.PeerStatus, len(peers))
	for i := range peers {
		back[i].PublicKey = peers[i].PublicKey
		p.peers[back[i].PublicKey] = &back[i]
	}
	if err := readReply(newLineReader(&fips, MaxReply), p.kv); err != nil {
		t.Fatal(err)
	}
	for i := range peers {
		if back[i].PathProbesOn != peers[i].PathProbesOn {
			t.Fatalf("peer %d: probes on %v from get=fips, want %v", i, back[i].PathProbesOn, peers[i].PathProbesOn)
		}
	}
}

func TestPathProbesConfigFile(t *testing.T) {
	conf := "[Interface]\nPrivateKey = " + strings.Repeat("A", 43) + "=\n\n" +
		"[Peer]\nPublicKey = " + strings.Repeat("B", 43) + "=\nPathProbes = true\nAllowedIPs = 10.0.0.2/32\n"
	cfg, _, err := ParseConfigFile(strings.NewReader(conf), "wg0.conf", nil)
	if err != nil {
		t.Fatal(err)
	}
	if pp := cfg.Peers[0].PathProbes; pp == nil || !*pp {
		t.Fatalf("PathProbes %v, want true", pp)
	}
	on := true
	out := FormatConfig(device.Status{Peers: []device.PeerStatus{{PublicKey: cfg.Peers[0].PublicKey, PathProbes: &on}}})
	if !strings.Contains(out, "PathProbes = true\n") {
		t.Fatalf("no PathProbes line in\n%s", out)
	}
	if _, _, err := ParseConfigFile(strings.NewReader("[Peer]\nPublicKey = "+strings.Repeat("B", 43)+"=\nPathProbes = maybe\n"), "x", nil); err == nil || !strings.Contains(err.Error(), "PathProbes") {
		t.Fatalf("PathProbes = maybe: %v", err)
	}
	args, err := ParseSetArgs(strings.Fields("peer "+strings.Repeat("B", 43)+"= path-probes false"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pp := args.Peers[0].PathProbes; pp == nil || *pp {
		t.Fatalf("path-probes false: %v", pp)
	}
}
