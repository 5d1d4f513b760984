package ipc_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/ipc"
)

var awgParams = device.Obfuscation{Jc: 4, Jmin: 40, Jmax: 70, S1: 52, S2: 37,
	H1: 1234567891, H2: 1234567892, H3: 1234567893, H4: 1234567894}

const awgLines = "jc=4\njmin=40\njmax=70\ns1=52\ns2=37\nh1=1234567891\nh2=1234567892\nh3=1234567893\nh4=1234567894\n"

func TestParseSetObfuscation(t *testing.T) {
	cfg := mustParseSet(t, awgLines+"\n")
	if cfg.Obfuscation == nil || *cfg.Obfuscation != awgParams {
		t.Fatalf("got %+v", cfg.Obfuscation)
	}
	// One key replaces all nine, as in amneziawg-go.
	cfg = mustParseSet(t, "jc=3\n\n")
	if cfg.Obfuscation == nil || *cfg.Obfuscation != (device.Obfuscation{Jc: 3}) {
		t.Fatalf("jc alone: got %+v", cfg.Obfuscation)
	}
	// None leaves them alone.
	if cfg := mustParseSet(t, "listen_port=1\n\n"); cfg.Obfuscation != nil {
		t.Fatalf("no key: got %+v", cfg.Obfuscation)
	}
	// Written back, the request means the same.
	var b bytes.Buffer
	if err := ipc.WriteSet(&b, &device.Config{Obfuscation: &awgParams}); err != nil {
		t.Fatal(err)
	}
	if b.String() != awgLines+"\n" {
		t.Fatalf("WriteSet wrote\n%s", b.String())
	}
}

// get=1 shows the keys that are set, after fwmark, as amneziawg-go does;
// the client reads them back.
func TestGetObfuscation(t *testing.T) {
	st := device.Status{ListenPort: 51820, Obfuscation: device.Obfuscation{Jc: 4, H4: 77}}
	var b bytes.Buffer
	if err := ipc.WriteGet(&b, st); err != nil {
		t.Fatal(err)
	}
	// With obfuscation on, the unset types are shown as their standard
	// values, as amneziawg-go shows them: awg(8) reads a missing h2 as 0
	// and would print "h2: 0".
	if got, want := b.String(), "listen_port=51820\njc=4\nh1=1\nh2=2\nh3=3\nh4=77\n"; got != want {
		t.Fatalf("WriteGet wrote %q, want %q", got, want)
	}
	b.Reset()
	if err := ipc.WriteGet(&b, device.Status{ListenPort: 51820}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "listen_port=51820\n"; got != want {
		t.Fatalf("plain: WriteGet wrote %q, want %q (wireguard-go's reply)", got, want)
	}
	_, dir := startServer(t, &mapHandler{st: device.Status{Obfuscation: awgParams}}, ipc.ServeOptions{})
	got, err := dial(t, dir).Get()
	if err != nil {
		t.Fatal(err)
	}
	if got.Obfuscation != awgParams {
		t.Fatalf("client read %+v", got.Obfuscation)
	}
}

func TestConfigFileObfuscation(t *testing.T) {
	cfg := parseConf(t, "[Interface]\nPrivateKey = "+b64(1)+"\nJc = 4\njmin=40\nJMAX = 70\nS1 = 52\nS2 = 37\n"+
		"H1 = 1234567891\nH2 = 1234567892\nH3 = 1234567893\nH4 = 1234567894\n")
	if cfg.Obfuscation == nil || *cfg.Obfuscation != awgParams {
		t.Fatalf("got %+v", cfg.Obfuscation)
	}
	// setconf without the keys leaves them as they are (awg's meaning),
	// so that the request still suits a stock wireguard-go.
	if cfg := parseConf(t, "[Interface]\nPrivateKey = "+b64(1)+"\n"); cfg.Obfuscation != nil {
		t.Fatalf("no keys: got %+v", cfg.Obfuscation)
	}
	if _, _, err := ipc.ParseConfigFile(strings.NewReader("[Interface]\nJc = many\n"), "x.conf", nil); err == nil || !strings.Contains(err.Error(), "Jc") {
		t.Fatalf("bad Jc: %v", err)
	}
	if _, _, err := ipc.ParseConfigFile(strings.NewReader("[Peer]\nJc = 4\n"), "x.conf", nil); err == nil {
		t.Fatal("Jc in [Peer] accepted")
	}
	text := ipc.FormatConfig(device.Status{Obfuscation: awgParams})
	for _, line := range []string{"Jc = 4\n", "Jmin = 40\n", "Jmax = 70\n", "S1 = 52\n", "S2 = 37\n", "H1 = 1234567891\n", "H4 = 1234567894\n"} {
		if !strings.Contains(text, line) {
			t.Errorf("showconf lacks %q:\n%s", line, text)
		}
	}
	back := parseConf(t, text)
	if back.Obfuscation == nil || *back.Obfuscation != awgParams {
		t.Fatalf("showconf does not read back: %+v", back.Obfuscation)
	}
}

func TestSetArgsObfuscation(t *testing.T) {
	cfg, err := ipc.ParseSetArgs([]string{"jc", "4", "h1", "99", "listen-port", "1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Obfuscation == nil || *cfg.Obfuscation != (device.Obfuscation{Jc: 4, H1: 99}) {
		t.Fatalf("got %+v", cfg.Obfuscation)
	}
	if _, err := ipc.ParseSetArgs([]string{"peer", b64(2), "jc", "4"}, nil, nil); err == nil {
		t.Fatal("jc after peer accepted")
	}
	if _, err := ipc.ParseSetArgs([]string{"h2", "x"}, nil, nil); err == nil {
		t.Fatal("h2 x accepted")
	}
}

var awg2Params = device.Obfuscation{Jc: 4, Jmin: 40, Jmax: 70, S1: 52, S2: 37, S3: 21, S4: 13,
	H1: 100000, H1Max: 199999, H2: 200000, H2Max: 299999, H3: 300000, H3Max: 399999, H4: 400000, H4Max: 4000000000,
	I1: "<b 0xc0ffee> <r 8> <t>", I3: "<rc 5>"}

const awg2Lines = "jc=4\njmin=40\njmax=70\ns1=52\ns2=37\ns3=21\ns4=13\nh1=100000-199999\nh2=200000-299999\n" +
	"h3=300000-399999\nh4=400000-4000000000\ni1=<b 0xc0ffee> <r 8> <t>\ni3=<rc 5>\n"

// AmneziaWG 2.0's keys: through a set request, a get reply, a
// configuration file and `set` arguments, and back.
func TestObfuscation2Keys(t *testing.T) {
	cfg := mustParseSet(t, awg2Lines+"\n")
	if cfg.Obfuscation == nil || *cfg.Obfuscation != awg2Params {
		t.Fatalf("set: got %+v", cfg.Obfuscation)
	}
	var b bytes.Buffer
	if err := ipc.WriteSet(&b, &device.Config{Obfuscation: &awg2Params}); err != nil {
		t.Fatal(err)
	}
	if b.String() != awg2Lines+"\n" {
		t.Fatalf("WriteSet wrote\n%s", b.String())
	}
	b.Reset()
	if err := ipc.WriteSet(&b, &device.Config{Obfuscation: &device.Obfuscation{}}); err != nil {
		t.Fatal(err)
	}
	if cfg := mustParseSet(t, b.String()); cfg.Obfuscation == nil || *cfg.Obfuscation != (device.Obfuscation{}) {
		t.Fatalf("turning off wrote %q, read %+v", b.String(), cfg.Obfuscation)
	}
	_, dir := startServer(t, &mapHandler{st: device.Status{Obfuscation: awg2Params}}, ipc.ServeOptions{})
	got, err := dial(t, dir).Get()
	if err != nil || got.Obfuscation != awg2Params {
		t.Fatalf("get: %+v, %v", got.Obfuscation, err)
	}
	text := ipc.FormatConfig(device.Status{Obfuscation: awg2Params})
	for _, line := range []string{"S3 = 21\n", "S4 = 13\n", "H4 = 400000-4000000000\n", "I1 = <b 0xc0ffee> <r 8> <t>\n"} {
		if !strings.Contains(text, line) {
			t.Errorf("showconf lacks %q:\n%s", line, text)
		}
	}
	if back := parseConf(t, text); back.Obfuscation == nil || *back.Obfuscation != awg2Params {
		t.Fatalf("showconf does not read back: %+v", back.Obfuscation)
	}
	args, err := ipc.ParseSetArgs([]string{"s4", "13", "h4", "5-9", "i2", "<r 3>"}, nil, nil)
	if err != nil || *args.Obfuscation != (device.Obfuscation{S4: 13, H4: 5, H4Max: 9, I2: "<r 3>"}) {
		t.Fatalf("set args: %+v, %v", args.Obfuscation, err)
	}
	for _, bad := range []string{"h1=9-5\n\n", "h1=5-\n\n", "h1=-5\n\n", "h1=1-2-3\n\n", "h2=4294967296-4294967297\n\n", "s3=x\n\n"} {
		if _, err := ipc.ParseSet(strings.NewReader(bad), 0); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// `fips-go set wg0 s1 0` and a request naming keys send exactly those keys,
// zeros included, so that the daemon changes those alone.
func TestWriteSetNamedObfuscationKeys(t *testing.T) {
	cfg, err := ipc.ParseSetArgs([]string{"s1", "0", "h4", "77-99"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := ipc.WriteSet(&b, cfg); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "s1=0\nh4=77-99\n\n"; got != want {
		t.Fatalf("wrote %q, want %q", got, want)
	}
	back, err := ipc.ParseSet(&b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.ObfuscationKeys, []string{"s1", "h4"}) || *back.Obfuscation != (device.Obfuscation{H4: 77, H4Max: 99}) {
		t.Fatalf("read back keys %q, values %+v", back.ObfuscationKeys, *back.Obfuscation)
	}
}

// The header protection key: hex in UAPI requests and replies, base64 in a
// configuration file (as awg(8) reads and writes it).
func TestHeaderProtectionKey(t *testing.T) {
	var k [32]byte
	for i := range k {
		k[i] = byte(i + 100)
	}
	cfg := mustParseSet(t, "header_protection_key="+fmt.Sprintf("%x", k)+"\ns1=20\n\n")
	if cfg.Obfuscation == nil || cfg.Obfuscation.HeaderProtectionKey != k || !slices.Contains(cfg.ObfuscationKeys, "header_protection_key") {
		t.Fatalf("UAPI: got %+v, keys %q", cfg.Obfuscation, cfg.ObfuscationKeys)
	}
	var b bytes.Buffer
	if err := ipc.WriteGet(&b, device.Status{Obfuscation: device.Obfuscation{S1: 20, HeaderProtectionKey: k}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), fmt.Sprintf("header_protection_key=%x\n", k)) {
		t.Fatalf("get reply lacks the key:\n%s", b.String())
	}
	kb64 := base64.StdEncoding.EncodeToString(k[:])
	fc := parseConf(t, "[Interface]\nPrivateKey = "+b64(1)+"\nHeaderProtectionKey = "+kb64+"\n")
	if fc.Obfuscation == nil || fc.Obfuscation.HeaderProtectionKey != k {
		t.Fatalf("config file: got %+v", fc.Obfuscation)
	}
	if out := ipc.FormatConfig(device.Status{Obfuscation: device.Obfuscation{S1: 20, HeaderProtectionKey: k}}); !strings.Contains(out, "HeaderProtectionKey = "+kb64+"\n") {
		t.Fatalf("showconf lacks the base64 key:\n%s", out)
	}
	if _, err := ipc.ParseSet(strings.NewReader("header_protection_key=12\n\n"), 0); err == nil {
		t.Fatal("a short key was accepted")
	}
}
